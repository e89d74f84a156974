// The agent's side of a web call, on the audio thread: 8 kHz 16-bit frames
// from the call's socket, held in a small jitter buffer and played at the
// context's rate (linear interpolation: the voice is telephone band).
// Playing starts once 60 ms is buffered and again after running dry;
// "clear" (the caller interrupted) drops everything queued at once. The
// page hears, every 100 ms, how many 20 ms frames were received, played
// and dropped, and how often the buffer ran dry.

const IN_RATE = 8000;
const FRAME = 160;
const PRIME = 480;
// Never hold more than a second: a stall is not made up by lagging behind.
const CAPACITY = 8000;

class Playback extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = IN_RATE / sampleRate;
    this.queue = new Float32Array(CAPACITY);
    this.start = 0;
    this.length = 0;
    /** Position between queue[start] and the next sample. */
    this.frac = 0;
    this.primed = false;
    this.stats = { received: 0, played: 0, dropped: 0, underruns: 0 };
    this.playedSamples = 0;
    this.lastReport = 0;
    this.port.onmessage = (e) => {
      if (e.data === "clear") {
        this.stats.dropped += Math.ceil(this.length / FRAME);
        this.length = 0;
        this.primed = false;
        return;
      }
      const samples = new Int16Array(e.data);
      this.stats.received += samples.length / FRAME;
      for (const s of samples) {
        if (this.length === CAPACITY) {
          this.start = (this.start + 1) % CAPACITY;
          this.length--;
        }
        this.queue[(this.start + this.length) % CAPACITY] = s / 32768;
        this.length++;
      }
    };
  }

  /** @param {Float32Array[][]} _inputs @param {Float32Array[][]} outputs */
  process(_inputs, outputs) {
    const out = outputs[0][0];
    if (!this.primed && this.length >= PRIME) this.primed = true;
    for (let i = 0; i < out.length; i++) {
      if (!this.primed || this.length < 2) {
        if (this.primed) {
          this.primed = false;
          this.stats.underruns++;
        }
        out[i] = 0;
        continue;
      }
      const a = this.queue[this.start];
      const b = this.queue[(this.start + 1) % CAPACITY];
      out[i] = a + (b - a) * this.frac;
      this.frac += this.step;
      while (this.frac >= 1) {
        this.frac -= 1;
        this.start = (this.start + 1) % CAPACITY;
        this.length--;
        this.playedSamples++;
      }
    }
    for (let c = 1; c < outputs[0].length; c++) outputs[0][c].set(out);
    this.stats.played = Math.floor(this.playedSamples / FRAME);
    if (currentTime - this.lastReport >= 0.1) {
      this.lastReport = currentTime;
      this.port.postMessage({ ...this.stats });
    }
    return true;
  }
}

registerProcessor("parley-playback", Playback);

// A module (addModule loads it as one): its names stay its own.
export {};
