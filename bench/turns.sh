#!/usr/bin/env bash
# Benchmark: end of turn, as LiveKit's eot-bench measures it. The labelled
# set (crates/speech/src/eot.rs: 54 clips in espeak-ng and Piper, G.711
# μ-law; complete sentences, sentences paused 300–900 ms inside, numbers
# read in groups) through today's rule at every silence from 300 to
# 1,500 ms, and the smart rule (Silero VAD + Smart Turn v3.2, alone and
# with the words whisper tiny.en hears early) at several pauses and
# thresholds. Prints each rule's false cut-off rate and median / p90
# end-of-turn delay, the lowest median delay at <= 5% false cut-offs, and
# the models' CPU cost per call.
#
# Usage: bench/turns.sh   (about 10 minutes on 2 cores)
# Needs espeak-ng and the PyPI packages .ci/run installs (the Wyoming
# servers and their models; pipecat-ai and onnxruntime for the turn models).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p parley-speech --features local-servers --example eot_bench
./target/release/examples/eot_bench
