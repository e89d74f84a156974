// A web call's audio in the browser: the microphone to the call's socket
// (`/calls/web`, see the API reference) and the agent's voice back. Used by
// the dashboard ("Talk to this agent") and by the webchat widget on other
// sites, which imports it from Parley's origin (served with CORS, like the
// worklets), so it imports nothing.
//
// `openAudio` asks for the microphone first (a refusal places no call) and
// loads two AudioWorklets from Parley's origin: capture.js sends 20 ms of
// 16 kHz PCM at a time, playback.js plays the agent's 8 kHz PCM from a
// small jitter buffer and drops it all on `clear` (the caller talked over
// it). `join` then presents the call's single-use token in the socket's
// first frame, never in the URL.

/**
 * @typedef {"connecting" | "ringing" | "talking" | "ended"} CallState
 * @typedef {{received: number, played: number, dropped: number, underruns: number}} PlaybackStats
 * @typedef {{onState: (state: CallState, detail?: string) => void, onStats?: (stats: PlaybackStats) => void}} Handlers
 * @typedef {{hangUp: () => void, mute: (muted: boolean) => void}} WebCall
 * @typedef {{join: (web: {url: string, token: string}, handlers: Handlers) => WebCall, close: () => void}} Audio
 */

/** What to tell a person whose browser cannot open the microphone. */
function microphoneProblem(/** @type {unknown} */ e) {
  const name = e instanceof DOMException ? e.name : "";
  if (name === "NotAllowedError" || name === "SecurityError") {
    return "The browser did not allow the microphone. Allow it for this site (the icon in the address bar) and try again.";
  }
  if (name === "NotFoundError") return "No microphone was found. Connect one and try again.";
  return `The microphone could not be opened: ${e instanceof Error ? e.message : String(e)}`;
}

/**
 * The microphone and the audio graph, ready to join a call.
 * @param {string} base Parley's origin (`https://parley.example.com`)
 * @returns {Promise<Audio>}
 */
export async function openAudio(base) {
  if (!navigator.mediaDevices?.getUserMedia) {
    throw new Error("Calls need a secure page: open it over https (or on localhost).");
  }
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
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    microphone.getTracks().forEach((t) => t.stop());
    context.close().catch(() => {});
  };
  try {
    await context.audioWorklet.addModule(new URL("/assets/worklets/capture.js", base).href);
    await context.audioWorklet.addModule(new URL("/assets/worklets/playback.js", base).href);
  } catch (e) {
    close();
    throw e;
  }
  return {
    close,
    join(web, { onState, onStats }) {
      const capture = new AudioWorkletNode(context, "parley-capture", { channelCount: 1, channelCountMode: "explicit" });
      const playback = new AudioWorkletNode(context, "parley-playback", { numberOfInputs: 0, outputChannelCount: [1] });
      playback.port.onmessage = (e) => onStats?.(e.data);
      const socketUrl = new URL(web.url, base);
      socketUrl.protocol = socketUrl.protocol === "https:" ? "wss:" : "ws:";
      const ws = new WebSocket(socketUrl.href);
      ws.binaryType = "arraybuffer";
      let ended = false;
      /** @param {string} [detail] why it ended, when on an error */
      const finish = (detail) => {
        if (ended) return;
        ended = true;
        close();
        if (ws.readyState <= WebSocket.OPEN) ws.close(1000);
        onState("ended", detail);
      };
      ws.onopen = () => {
        const start = {
          type: "start",
          token: web.token,
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
      return {
        hangUp() {
          if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "end" }));
          finish();
        },
        mute(muted) {
          // A disabled track sends silence: the call keeps its 20 ms rhythm.
          for (const track of microphone.getAudioTracks()) track.enabled = !muted;
        },
      };
    },
  };
}
