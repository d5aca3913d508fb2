//! The message limits of every hop (issue 24 §2), in one place: what the gateway accepts
//! from a client, what a string param may hold, and what gRPC encodes and decodes on both
//! ends of every call (gateway → service, service → service, the bus feed). Anything the
//! gateway accepts either reaches its service or is refused `invalid_params` naming the
//! field and the limit; results up to [`GRPC_RESPONSE`] travel back.
//!
//! ```text
//! client ──WS ≤ WS_MESSAGE──► gateway ──gRPC request ≤ GRPC_REQUEST──► service
//!        ◄──────────────────         ◄──gRPC response / bus ≤ GRPC_RESPONSE──
//! ```

/// Largest WebSocket message (and frame) the gateway accepts from a client, in bytes; a
/// bigger one closes the socket with 1009 and the limit.
pub const WS_MESSAGE: usize = 16 << 20;

/// Longest string in a request's params, in bytes (UTF-8). A longer one is refused by the
/// gateway's params validation as `invalid_params` "`params.text: at most 4194304 bytes`"
/// (services may cap a field lower and name it the same way). Audio bigger than this goes
/// by path, not inline `data`.
pub const STRING_PARAM: usize = 4 << 20;

/// Most bytes of one connection's requests that the gateway holds at once, admitted and
/// not yet answered (running or waiting in the connection's lane): a request that would
/// pass it is refused `unavailable` with `details.reason: "busy"` (one message of up to
/// [`WS_MESSAGE`] is always admitted when nothing else waits). Issue 40: 1,028 admitted
/// requests of up to 16 MiB each could hold gigabytes of one connection's params.
pub const CONNECTION_REQUEST_BYTES: usize = 2 * WS_MESSAGE;

/// A message this long or longer is a large request: the gateway processes at most
/// [`GATEWAY_LARGE_REQUEST_BYTES`] of them at once, across all connections.
pub const LARGE_MESSAGE: usize = 256 << 10;

/// Most bytes of large requests ([`LARGE_MESSAGE`] and longer) the gateway holds at once
/// across all connections, from their parse until their answer. A connection whose large
/// message does not fit waits (its reader pauses, up to the gateway's `large_wait`, 10 s),
/// then its calls are refused `unavailable` with `details.reason: "busy"`; answers to
/// server→client requests are delivered whatever the wait. Issue 40: the gateway's memory
/// is then its idle size, the frame buffers of its connections and at most this many bytes
/// of large requests (each held about twice while converted), however many clients send
/// them.
pub const GATEWAY_LARGE_REQUEST_BYTES: usize = 2 * WS_MESSAGE;

/// Most bytes of answers and notifications queued for one connection that its client has
/// not read yet; past it the connection is closed as too slow (1008, "outbound queue
/// full; reconnect and call session.resume"), as when the queue's frame count fills. One
/// frame bigger than this (up to [`GRPC_RESPONSE`]) is queued when the queue is empty.
pub const CONNECTION_OUTBOUND_BYTES: usize = 4 * WS_MESSAGE;

/// Largest gRPC request message: the gateway refuses (`invalid_params`, naming the biggest
/// field) a request that encodes larger, every service decodes up to it, and service →
/// service clients encode up to it. Four times [`WS_MESSAGE`], so that what JSON → protobuf
/// encoding adds (tags, `Struct` numbers as doubles) fits for any ordinary request.
pub const GRPC_REQUEST: usize = 64 << 20;

/// Largest gRPC response or stream message (a result, a bus notification): services encode
/// up to it, the gateway and service → service clients decode up to it — a long
/// `session.resume`, an `audio.speak` result, a `site.get` with many entries.
pub const GRPC_RESPONSE: usize = 64 << 20;

// ---------------------------------------------------------------------------------------
// Work per call: what one request may make a service compute or hold, whatever its size
// (within the message limits above). Each bound is applied where the work happens and is
// tested with the input that used to exceed it.
// ---------------------------------------------------------------------------------------

/// Most distinct words of a `memory.search` query (and of the recall before a turn) that
/// are looked up; later words are ignored. A recall query is a whole user message.
pub const SEARCH_WORDS: usize = 32;

/// Longest word of a `memory.search` query used whole, in characters: a longer word (a
/// hash, a base64 blob, a run of one character) is searched by its first this many
/// characters. An FTS5 trigram phrase of `n` characters is `n − 2` tokens, and matching it
/// holds one position list per token for every row it meets: a 10,000-character run of one
/// letter against a stored run of the same letter held 287 MB, a 100,000-character one
/// about 2.4 GB. At 32 characters a phrase holds at most 30 position lists of one row.
pub const SEARCH_WORD_CHARS: usize = 32;

/// Most FTS5 phrases of one `memory.search` query (its words plus the trigrams of its
/// non-ASCII words).
pub const SEARCH_PHRASES: usize = 64;

/// Most occurrences of one phrase counted in one column of one memory when it is scored
/// (bm25's term frequency): past this the count stops, so scoring a row costs at most
/// (column length + this × phrase length) per phrase, even for a periodic phrase in a
/// periodic text ("zzz" occurs at every position of a run of z). Ordinary text stays far
/// below it: a 64 KiB memory holds about 11,000 words.
pub const SEARCH_OCCURRENCES: u32 = 4_096;

/// Longest run of one kind of character (whitespace, or anything else) that a token
/// estimate hands to a BPE tokenizer whole, in bytes: a longer run is counted in pieces
/// of this size. BPE merging within one pre-tokenized piece costs the square of its
/// length (`tiktoken`: 1.6 s for 64,000 × "z", hours for a 4 MiB pasted blob); in pieces
/// the estimate of a text costs time in proportion to its length, and an ordinary word is
/// never cut.
pub const TOKEN_ESTIMATE_RUN: usize = 256;

/// Most prompts that wait behind a session's running turn (queued and to be steered in
/// together: `session.prompt`, `session.steer`, `command.run`, `skill.create`); one more is
/// refused `session_busy` naming the limit, and nothing of it is stored. Each waiting prompt
/// holds its text (up to [`STRING_PARAM`]) in memory until its turn starts (issue 40: the
/// queue had no bound, so a client could park gigabytes behind one long turn).
pub const PROMPTS_WAITING: usize = 64;

/// Most JSON values (every scalar, array, object and object key counts one) in one
/// WebSocket message. The gateway counts them without building anything before it parses
/// a message longer than this many bytes (a shorter one cannot hold more), and refuses a
/// message over the limit `-32600` "invalid request" (issue 40: a 16 MiB message of
/// `[0,0,…]` built 286 MB of JSON tree, one of `[{},{},…]` 19 GB of batch work).
pub const JSON_VALUES: usize = 100_000;

/// Most members of one JSON-RPC batch; a longer batch is refused as a whole, `-32600`
/// "invalid request" with `id: null` (issue 40). Its members run at most
/// `max_in_flight` at a time, like a connection's single requests.
pub const BATCH_MEMBERS: usize = 1_000;
