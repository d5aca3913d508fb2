/**
 * Exactly-once, in-order delivery of `session.event` (protocol § session.event: every event has
 * a contiguous per-session `seq`; `session.resume{sessionId, afterSeq}` replays what was missed).
 *
 * The sequencer remembers, per session, the highest `seq` handed to listeners. A live event at
 * or below it is a duplicate and dropped. A live event above `delivered + 1` on a *tracked*
 * session is a gap: it is buffered and the client fetches the missing ones with
 * `session.resume`; once that answers, the fetched events and then the buffer are delivered in
 * order. An untracked session only gets deduplication (the client never asked for its history).
 * This module is pure bookkeeping (no I/O): it returns what to deliver and when to fetch.
 * Same rules as the Rust SDK's `sequencer.rs`.
 */

/** The fields the sequencer needs of a `session.event`. */
export interface SequencedEvent {
  sessionId: string;
  seq: number;
}

interface SessionSeq<E> {
  /** Resumed after a reconnect and gap-filled. */
  tracked: boolean;
  /** Highest seq delivered; undefined until the first event or an explicit baseline. */
  delivered: number | undefined;
  /** Live events that arrived ahead of a gap, by seq. */
  buffer: Map<number, E>;
  /** A `session.resume` for this session is in flight. */
  filling: boolean;
}

/** What the caller must do after offering a live event. */
export interface LiveOutcome<E> {
  /** Events to hand to listeners, in this order. */
  deliver: E[];
  /** Start a `session.resume` with this `afterSeq`. */
  fillAfter?: number;
}

/** A valid seq: a non-negative safe integer. */
export function isSeq(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/** Delivery state of every session the client has seen or tracks. */
export class Sequencer<E extends SequencedEvent = SequencedEvent> {
  private readonly sessions = new Map<string, SessionSeq<E>>();

  private entry(sessionId: string): SessionSeq<E> {
    let s = this.sessions.get(sessionId);
    if (!s) {
      s = { tracked: false, delivered: undefined, buffer: new Map(), filling: false };
      this.sessions.set(sessionId, s);
    }
    return s;
  }

  /**
   * Marks a session tracked. `baseline` is the seq already seen (0 for a new session); it only
   * applies when nothing is known yet, so tracking never re-delivers or skips events.
   */
  track(sessionId: string, baseline?: number): void {
    const s = this.entry(sessionId);
    s.tracked = true;
    if (s.delivered === undefined) s.delivered = baseline;
  }

  /** Stops tracking a session (it is no longer resumed after a reconnect). */
  untrack(sessionId: string): void {
    const s = this.sessions.get(sessionId);
    if (s) s.tracked = false;
  }

  /** True when the session is tracked. */
  isTracked(sessionId: string): boolean {
    return this.sessions.get(sessionId)?.tracked ?? false;
  }

  /** Every tracked session id. */
  tracked(): string[] {
    return [...this.sessions].filter(([, s]) => s.tracked).map(([id]) => id);
  }

  /** Highest seq delivered for a session. */
  delivered(sessionId: string): number | undefined {
    return this.sessions.get(sessionId)?.delivered;
  }

  /** Offers a live `session.event` received on the connection. */
  onLive(event: E): LiveOutcome<E> {
    const { sessionId, seq } = event;
    const s = this.entry(sessionId);
    const out: LiveOutcome<E> = { deliver: [] };
    if (s.filling) {
      if (s.delivered === undefined || seq > s.delivered) s.buffer.set(seq, event);
      return out;
    }
    if (s.delivered !== undefined && seq <= s.delivered) return out; // duplicate
    const delivered = s.delivered ?? Math.max(seq - 1, 0);
    if (seq === delivered + 1 || !s.tracked) {
      s.delivered = seq;
      out.deliver.push(event);
      drainContiguous(s, out.deliver);
    } else {
      s.buffer.set(seq, event);
      s.filling = true;
      s.delivered = delivered;
      out.fillAfter = delivered;
    }
    return out;
  }

  /**
   * Marks every tracked session as filling (after a reconnect) and returns `[sessionId,
   * afterSeq]` for the `session.resume` calls to make.
   */
  beginResumeAll(): Array<[string, number]> {
    const fills: Array<[string, number]> = [];
    for (const [id, s] of this.sessions) {
      if (!s.tracked) continue;
      s.filling = true;
      fills.push([id, s.delivered ?? 0]);
    }
    return fills.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  }

  /** Forgets in-flight fills (their connection is gone); buffered events stay. */
  resetFills(): void {
    for (const s of this.sessions.values()) s.filling = false;
  }

  /**
   * Applies the answer of a fill (a `session.resume` the client made itself). `events` is
   * undefined when the call failed: the buffer is then delivered as is, with its gaps.
   */
  onFill(sessionId: string, events: E[] | undefined): E[] {
    const s = this.entry(sessionId);
    s.filling = false;
    const deliver: E[] = [];
    if (events) {
      for (const event of [...events].sort((a, b) => a.seq - b.seq)) {
        if (!isSeq(event.seq)) continue;
        if (s.delivered === undefined || event.seq > s.delivered) {
          s.delivered = event.seq;
          deliver.push(event);
        }
      }
    }
    drainContiguous(s, deliver);
    if (s.buffer.size > 0) {
      // The gap was not filled by session.resume: deliver what arrived rather than hold it forever.
      for (const seq of [...s.buffer.keys()].sort((a, b) => a - b)) {
        const event = s.buffer.get(seq) as E;
        s.buffer.delete(seq);
        if (s.delivered !== undefined && seq <= s.delivered) continue;
        s.delivered = seq;
        deliver.push(event);
      }
    }
    return deliver;
  }

  /**
   * Applies a `session.resume` the caller made itself: its events went to the caller, so they
   * count as delivered. Returns buffered events that became deliverable.
   */
  onCallerResume(sessionId: string, afterSeq: number, events: readonly E[]): E[] {
    const s = this.entry(sessionId);
    s.tracked = true;
    let seen = afterSeq;
    for (const e of events) if (isSeq(e.seq) && e.seq > seen) seen = e.seq;
    s.delivered = s.delivered === undefined ? seen : Math.max(s.delivered, seen);
    const deliver: E[] = [];
    if (!s.filling) drainContiguous(s, deliver);
    return deliver;
  }
}

/** Drops buffered events at or below `delivered` and moves contiguous ones to `deliver`. */
function drainContiguous<E>(s: SessionSeq<E>, deliver: E[]): void {
  if (s.delivered === undefined) return;
  let d = s.delivered;
  for (const seq of [...s.buffer.keys()].sort((a, b) => a - b)) {
    if (seq <= d) {
      s.buffer.delete(seq);
    } else if (seq === d + 1) {
      deliver.push(s.buffer.get(seq) as E);
      s.buffer.delete(seq);
      d = seq;
    } else {
      break;
    }
  }
  s.delivered = d;
}
