// The microphone's side of a web call, on the audio thread: the context's
// rate (44.1 or 48 kHz, usually) resampled to 16 kHz with a windowed-sinc
// low-pass (cut at 7 kHz, so nothing above 8 kHz folds into speech), as
// 16-bit samples in 20 ms buffers (320 samples) posted to the page, which
// sends them on the call's socket.

const OUT_RATE = 16000;
const FRAME = 320;
// Taps each side of the output position.
const HALF = 16;
const CUTOFF_HZ = 7000;
// The filter's taps are computed once for this many positions between two
// input samples (an output falls at the nearest one, 1/256 of a sample off
// at worst), not per sample: the audio thread does 32 multiply-adds per
// output, so a busy machine's capture keeps up instead of dropping audio.
const PHASES = 256;

class Capture extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / OUT_RATE;
    this.cutoff = CUTOFF_HZ / sampleRate;
    /** Row p: the taps for an output p/PHASES of a sample past its base. */
    this.taps = Array.from({ length: PHASES + 1 }, (_, p) =>
      Float32Array.from({ length: 2 * HALF }, (_, j) => this.tap(p / PHASES + HALF - 1 - j)),
    );
    /** Input not yet consumed, and where the next output falls in it. */
    this.pending = new Float32Array(0);
    this.pos = HALF;
    this.out = new Int16Array(FRAME);
    this.filled = 0;
  }

  /** @param {number} d distance in input samples */
  tap(d) {
    const x = 2 * this.cutoff * d;
    const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
    // Blackman window over [-HALF, HALF].
    const w = 0.42 + 0.5 * Math.cos((Math.PI * d) / HALF) + 0.08 * Math.cos((2 * Math.PI * d) / HALF);
    return 2 * this.cutoff * sinc * w;
  }

  /** @param {Float32Array[][]} inputs */
  process(inputs) {
    const channel = inputs[0]?.[0];
    if (!channel) return true;
    const joined = new Float32Array(this.pending.length + channel.length);
    joined.set(this.pending);
    joined.set(channel, this.pending.length);
    let pos = this.pos;
    while (pos + HALF < joined.length) {
      const base = Math.floor(pos);
      const taps = this.taps[Math.round((pos - base) * PHASES)];
      let sum = 0;
      for (let j = 0; j < 2 * HALF; j++) sum += joined[base - HALF + 1 + j] * taps[j];
      const v = Math.max(-1, Math.min(1, sum));
      this.out[this.filled++] = Math.round(v * 32767);
      if (this.filled === FRAME) {
        const frame = this.out.buffer;
        this.port.postMessage(frame, [frame]);
        this.out = new Int16Array(FRAME);
        this.filled = 0;
      }
      pos += this.step;
    }
    // Keep HALF samples of history before the next output position.
    const drop = Math.max(0, Math.floor(pos) - HALF);
    this.pending = joined.slice(drop);
    this.pos = pos - drop;
    return true;
  }
}

registerProcessor("parley-capture", Capture);

// A module (addModule loads it as one): its names stay its own.
export {};
