// A call recording's player: the browser's own audio controls (keyboard
// and screen-reader ready, seeking by HTTP range requests) above a stereo
// waveform drawn from the WAV itself — the caller on the left channel, the
// agent on the right — that shows what has played and seeks on a click.

import { html, useEffect, useRef, useState } from "../lib/html.js";

/** @typedef {{caller: Float32Array, agent: Float32Array}} Peaks */

/**
 * The loudest sample per column of each channel of a 16-bit PCM WAV.
 * @param {ArrayBuffer} buffer
 * @param {number} columns
 * @returns {Peaks | null} null when the file is not 16-bit PCM.
 */
export function wavPeaks(buffer, columns) {
  const view = new DataView(buffer);
  const tag = (/** @type {number} */ at) => String.fromCharCode(...new Uint8Array(buffer, at, 4));
  if (buffer.byteLength < 12 || tag(0) !== "RIFF" || tag(8) !== "WAVE") return null;
  let channels = 0;
  let bits = 0;
  let at = 12;
  while (at + 8 <= buffer.byteLength) {
    const id = tag(at);
    const size = view.getUint32(at + 4, true);
    const body = at + 8;
    if (id === "fmt ") {
      if (view.getUint16(body, true) !== 1) return null;
      channels = view.getUint16(body + 2, true);
      bits = view.getUint16(body + 14, true);
    } else if (id === "data") {
      if (bits !== 16 || channels < 1) return null;
      const frames = Math.floor(Math.min(size, buffer.byteLength - body) / (2 * channels));
      const caller = new Float32Array(columns);
      const agent = new Float32Array(columns);
      const perColumn = Math.max(1, frames / columns);
      // A typed array reads a 10-minute call in a few milliseconds
      // (little-endian, as every browser's platform is); else DataView.
      const samples = body % 2 === 0 ? new Int16Array(buffer, body, frames * channels) : null;
      const sample = (/** @type {number} */ i) => (samples ? samples[i] : view.getInt16(body + i * 2, true));
      for (let f = 0; f < frames; f++) {
        const col = Math.min(columns - 1, Math.floor(f / perColumn));
        const left = Math.abs(sample(f * channels)) / 32768;
        const right = channels > 1 ? Math.abs(sample(f * channels + 1)) / 32768 : left;
        if (left > caller[col]) caller[col] = left;
        if (right > agent[col]) agent[col] = right;
      }
      return { caller, agent };
    }
    at = body + size + (size % 2);
  }
  return null;
}

/**
 * @param {{src: string, durationMs: number | null | undefined, audio: {current: HTMLAudioElement | null},
 *   onTime: (ms: number) => void}} p
 */
export function RecordingPlayer({ src, durationMs, audio, onTime }) {
  const canvas = useRef(/** @type {HTMLCanvasElement | null} */ (null));
  const [peaks, setPeaks] = useState(/** @type {Peaks | null} */ (null));
  const [waveError, setWaveError] = useState("");
  const [position, setPosition] = useState(0);

  // The waveform comes from the same signed link; playback does not wait for it.
  useEffect(() => {
    const control = new AbortController();
    fetch(src, { signal: control.signal })
      .then((r) => (r.ok ? r.arrayBuffer() : Promise.reject(new Error(`The recording answered ${r.status}`))))
      .then((b) => {
        const p = wavPeaks(b, 1200);
        if (p) setPeaks(p);
        else setWaveError("The waveform cannot be drawn for this file.");
      })
      .catch((e) => {
        if (!control.signal.aborted) setWaveError(`The waveform could not be loaded: ${e.message}`);
      });
    return () => control.abort();
  }, [src]);

  // Follow playback every frame while playing, and on every seek.
  useEffect(() => {
    const el = audio.current;
    if (!el) return;
    let frame = 0;
    const report = () => {
      const ms = el.currentTime * 1000;
      setPosition(ms);
      onTime(ms);
    };
    const tick = () => {
      report();
      if (!el.paused) frame = requestAnimationFrame(tick);
    };
    const play = () => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(tick);
    };
    el.addEventListener("play", play);
    el.addEventListener("seeked", report);
    el.addEventListener("timeupdate", report);
    return () => {
      cancelAnimationFrame(frame);
      el.removeEventListener("play", play);
      el.removeEventListener("seeked", report);
      el.removeEventListener("timeupdate", report);
    };
  }, [src]);

  const total = (audio.current?.duration && Number.isFinite(audio.current.duration) ? audio.current.duration * 1000 : 0) || durationMs || 0;
  useEffect(() => {
    if (canvas.current && peaks) draw(canvas.current, peaks, total ? position / total : 0);
  }, [peaks, position, total]);

  /** @param {MouseEvent} e */
  const seek = (e) => {
    const el = audio.current;
    const c = canvas.current;
    if (!el || !c || !total) return;
    const box = c.getBoundingClientRect();
    el.currentTime = (Math.min(1, Math.max(0, (e.clientX - box.left) / box.width)) * total) / 1000;
  };

  return html`<div class="player">
    <audio ref=${audio} controls preload="metadata" src=${src} aria-label="Call recording"></audio>
    <div class="waveform">
      <div class="lanes" aria-hidden="true"><span>Caller</span><span>Agent</span></div>
      <canvas
        ref=${canvas}
        width="1200"
        height="160"
        role="img"
        aria-label="Waveform of the recording: the caller above, the agent below. Click to seek."
        onClick=${seek}
      ></canvas>
    </div>
    ${waveError && html`<p class="muted">${waveError}</p>`}
    <p><a href=${src} download>Download the recording (WAV)</a></p>
  </div>`;
}

/**
 * @param {HTMLCanvasElement} c
 * @param {Peaks} peaks
 * @param {number} played 0–1
 */
function draw(c, peaks, played) {
  const ctx = c.getContext("2d");
  if (!ctx) return;
  const style = getComputedStyle(c);
  const colour = (/** @type {string} */ name, /** @type {string} */ fallback) => style.getPropertyValue(name).trim() || fallback;
  const lanes = [
    { data: peaks.caller, done: colour("--wave-caller", "#4338ca"), rest: colour("--wave-caller-rest", "#c7c9f5") },
    { data: peaks.agent, done: colour("--wave-agent", "#116329"), rest: colour("--wave-agent-rest", "#b8dcc2") },
  ];
  const { width, height } = c;
  ctx.clearRect(0, 0, width, height);
  const lane = height / 2;
  const playedX = played * width;
  lanes.forEach(({ data, done, rest }, i) => {
    const mid = lane * i + lane / 2;
    const step = width / data.length;
    for (let x = 0; x < data.length; x++) {
      const h = Math.max(1, data[x] * (lane - 6));
      ctx.fillStyle = x * step < playedX ? done : rest;
      ctx.fillRect(x * step, mid - h / 2, Math.max(1, step - 0.5), h);
    }
  });
  ctx.fillStyle = colour("--text", "#18181b");
  ctx.fillRect(Math.min(width - 2, playedX), 0, 2, height);
}
