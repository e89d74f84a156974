// A web call from this page: the microphone to an agent and its voice back,
// over the call's WebSocket (`/calls/web`, see the API reference).
//
// The microphone is asked for first, so a refusal places no call. The call
// is placed with the signed-in member's session like any API request; the
// socket then presents the call's single-use token in its first frame (never
// in the URL). Audio runs in two AudioWorklets loaded from this origin (the
// page's script-src 'self' covers them): capture.js sends 20 ms of 16 kHz
// PCM at a time, playback.js plays the agent's 8 kHz PCM from a small
// jitter buffer and drops it all on `clear` (the caller talked over it).

import { api } from "./api.js";

/**
 * @typedef {"connecting" | "ringing" | "talking" | "ended"} CallState
 * @typedef {{received: number, played: number, dropped: number, underruns: number}} PlaybackStats
 * @typedef {{
 *   onState: (state: CallState, detail?: string) => void,
 *   onCall?: (call: {id: string}) => void,
 *   onStats?: (stats: PlaybackStats) => void,
 * }} Handlers
 * @typedef {{hangUp: () => void, mute: (muted: boolean) => void}} WebCall
 */

/** What to tell a person whose browser cannot start the call. */
function microphoneProblem(/** @type {unknown} */ e) {
  const name = e instanceof DOMException ? e.name : "";
  if (name === "NotAllowedError" || name === "SecurityError") {
    return "The browser did not allow the microphone. Allow it for this site (the icon in the address bar) and try again.";
  }
  if (name === "NotFoundError") return "No microphone was found. Connect one and try again.";
  return `The microphone could not be opened: ${e instanceof Error ? e.message : String(e)}`;
}

/**
 * Starts a web call with `agentId`; `handlers.onState` hears it ring, talk
 * and end (with why, when it ended on an error).
 * @param {number} agentId
 * @param {Handlers} handlers
 * @returns {Promise<WebCall>}
 */
export async function startWebCall(agentId, handlers) {
  const { onState, onCall, onStats } = handlers;
  if (!navigator.mediaDevices?.getUserMedia) {
    throw new Error("Web calls need a secure page: open the dashboard over https (or on localhost).");
  }
  onState("connecting");
  /** @type {MediaStream} */
  let microphone;
  try {
    microphone = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
  } catch (e) {
    throw new Error(microphoneProblem(e));
  }
  const context = new AudioContext({ latencyHint: "interactive" });
  let ended = false;
  /** @type {WebSocket | null} */
  let socket = null;
  /** @param {string} [detail] why it ended, when on an error */
  const finish = (detail) => {
    if (ended) return;
    ended = true;
    microphone.getTracks().forEach((t) => t.stop());
    context.close().catch(() => {});
    if (socket && socket.readyState <= WebSocket.OPEN) socket.close(1000);
    onState("ended", detail);
  };
  try {
    await context.audioWorklet.addModule("/assets/worklets/capture.js");
    await context.audioWorklet.addModule("/assets/worklets/playback.js");
    // A new key per call: each press is a new call, never a replay.
    const call = await api("POST", "/api/v1/calls", {
      body: { agent_id: agentId, transport: "web" },
      headers: { "Idempotency-Key": crypto.randomUUID() },
    });
    onCall?.(call);
    onState("ringing");
    const capture = new AudioWorkletNode(context, "parley-capture", { channelCount: 1, channelCountMode: "explicit" });
    const playback = new AudioWorkletNode(context, "parley-playback", { numberOfInputs: 0, outputChannelCount: [1] });
    playback.port.onmessage = (e) => onStats?.(e.data);
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}${call.web.url}`);
    socket = ws;
    ws.binaryType = "arraybuffer";
    ws.onopen = () => {
      const start = {
        type: "start",
        token: call.web.token,
        audio: { encoding: "pcm_s16le", sample_rate: 16000 },
        client: { output_latency_ms: Math.round((context.outputLatency || 0) * 1000) },
      };
      ws.send(JSON.stringify(start));
    };
    ws.onmessage = (e) => {
      if (e.data instanceof ArrayBuffer) {
        playback.port.postMessage(e.data, [e.data]);
        return;
      }
      const frame = JSON.parse(e.data);
      if (frame.type === "ready") {
        context.createMediaStreamSource(microphone).connect(capture);
        capture.port.onmessage = (m) => {
          if (ws.readyState === WebSocket.OPEN) ws.send(m.data);
        };
        playback.connect(context.destination);
        context.resume().catch(() => {});
        onState("talking");
      } else if (frame.type === "clear") {
        playback.port.postMessage("clear");
      } else if (frame.type === "error") {
        finish(frame.detail);
      } else if (frame.type === "end") {
        finish();
      }
    };
    ws.onclose = () => finish();
    ws.onerror = () => finish("The connection to the call was lost.");
  } catch (e) {
    finish();
    throw e;
  }
  return {
    hangUp() {
      if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "end" }));
      finish();
    },
    mute(muted) {
      // The capture worklet sends silence while muted (the call keeps its rhythm).
      for (const track of microphone.getAudioTracks()) track.enabled = !muted;
    },
  };
}
