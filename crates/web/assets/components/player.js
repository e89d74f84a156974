// A call recording's player: the browser's own audio controls (keyboard
// and screen-reader ready, seeking by HTTP range requests) above a stereo
// waveform — the caller on the left channel, the agent on the right — that
// shows what has played and seeks on a click. The waveform's peaks come
// from the API (about 10 KB for any length), so a long call's page does
// not download its whole recording to draw it. It is an SVG of one path
// per lane, drawn twice (to play, played) with the played copy clipped at
// the playhead: playback moves one rectangle, it never redraws the bars
// (a canvas redrawn per frame cost the page's first second on a slow CPU).

import { api } from "../lib/api.js";
import { html, useEffect, useMemo, useRef, useState } from "../lib/html.js";

/** @typedef {{caller: number[], agent: number[]}} Peaks (thousandths of full scale) */

/**
 * @param {{callId: string, src: string, durationMs: number | null | undefined,
 *   audio: {current: HTMLAudioElement | null}, onTime: (ms: number) => void}} p
 */
export function RecordingPlayer({ callId, src, durationMs, audio, onTime }) {
  const wave = useRef(/** @type {SVGSVGElement | null} */ (null));
  const [peaks, setPeaks] = useState(/** @type {Peaks | null} */ (null));
  const [waveError, setWaveError] = useState("");
  const [position, setPosition] = useState(0);

  // Playback does not wait for the waveform.
  useEffect(() => {
    const control = new AbortController();
    setPeaks(null);
    api("GET", `/api/v1/calls/${encodeURIComponent(callId)}/recording/waveform`, {
      query: { points: 1200 },
      signal: control.signal,
    })
      .then((w) => setPeaks({ caller: w.caller, agent: w.agent }))
      .catch((e) => {
        if (!control.signal.aborted) setWaveError(`The waveform could not be loaded: ${e.message}`);
      });
    return () => control.abort();
  }, [callId]);

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
  const played = total ? Math.min(1, position / total) * WIDTH : 0;
  const lanes = useMemo(() => peaks && { caller: bars(peaks.caller, 0), agent: bars(peaks.agent, 1) }, [peaks]);
  const clip = `played-${callId}`;

  /** @param {MouseEvent} e */
  const seek = (e) => {
    const el = audio.current;
    const svg = wave.current;
    if (!el || !svg || !total) return;
    const box = svg.getBoundingClientRect();
    el.currentTime = (Math.min(1, Math.max(0, (e.clientX - box.left) / box.width)) * total) / 1000;
  };

  return html`<div class="player">
    <audio ref=${audio} controls preload="metadata" src=${src} aria-label="Call recording"></audio>
    <div class="waveform" aria-busy=${peaks || waveError ? "false" : "true"}>
      <div class="lanes" aria-hidden="true"><span>Caller</span><span>Agent</span></div>
      <svg
        ref=${wave}
        class="wave"
        viewBox=${`0 0 ${WIDTH} ${HEIGHT}`}
        preserveAspectRatio="none"
        role="img"
        aria-label="Waveform of the recording: the caller above, the agent below. Click to seek."
        onClick=${seek}
      >
        ${lanes &&
        html`<defs><clipPath id=${clip}><rect x="0" y="0" width=${played} height=${HEIGHT} /></clipPath></defs>
          <path class="bars caller" d=${lanes.caller} />
          <path class="bars agent" d=${lanes.agent} />
          <g clip-path=${`url(#${clip})`}>
            <path class="bars caller played" d=${lanes.caller} />
            <path class="bars agent played" d=${lanes.agent} />
          </g>
          <rect class="playhead" x=${Math.min(WIDTH - 2, played)} y="0" width="2" height=${HEIGHT} />`}
      </svg>
    </div>
    ${waveError && html`<p class="muted">${waveError}</p>`}
    <p><a href=${src} download>Download the recording (WAV)</a></p>
  </div>`;
}

/** The waveform's drawing box (the SVG stretches it to its place). */
const WIDTH = 1200;
const HEIGHT = 160;

/**
 * One lane's bars as a single path: a rectangle per peak, centred on the
 * lane's middle (lane 0 on top).
 * @param {number[]} data thousandths of full scale
 * @param {number} lane
 */
function bars(data, lane) {
  const height = HEIGHT / 2;
  const mid = height * lane + height / 2;
  const step = WIDTH / Math.max(1, data.length);
  const width = Math.max(1, step - 0.5).toFixed(2);
  let d = "";
  for (let x = 0; x < data.length; x++) {
    const h = Math.max(1, (data[x] / 1000) * (height - 6));
    d += `M${(x * step).toFixed(2)} ${(mid - h / 2).toFixed(2)}h${width}v${h.toFixed(2)}h-${width}z`;
  }
  return d;
}
