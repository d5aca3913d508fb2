# Shipped by snowpea-svc-audio (svc-audio/src/helpers/pocketsphinx_stt.py): transcribes one
# 16 kHz mono 16-bit wav with pocketsphinx's bundled English model and prints the text.
# Usage: python3 pocketsphinx_stt.py FILE.wav   Exit 2 on unusable input.
import sys
import wave

from pocketsphinx import Decoder


def main():
    with wave.open(sys.argv[1], "rb") as w:
        if w.getframerate() != 16000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
            print("need 16 kHz mono 16-bit wav", file=sys.stderr)
            return 2
        data = w.readframes(w.getnframes())
    decoder = Decoder(samprate=16000, loglevel="FATAL")
    decoder.start_utt()
    decoder.process_raw(data, full_utt=True)
    decoder.end_utt()
    hyp = decoder.hyp()
    print(hyp.hypstr if hyp is not None else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
