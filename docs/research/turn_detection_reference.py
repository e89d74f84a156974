"""Run Silero VAD and Smart Turn v3.2 exactly as pipecat 1.14.0 does, on espeak-ng audio."""
import json, time, sys
import numpy as np, soundfile as sf, onnxruntime as ort
from pipecat.audio.vad.silero import SileroVADAnalyzer, SileroOnnxModel
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3
from pipecat.audio.turn.smart_turn._whisper_features import compute_whisper_log_mel_features, _MEL_FILTERS, _HANN_WINDOW

SR = 16000
OUT = "/work/notes/reference"
import os; os.makedirs(OUT, exist_ok=True)

speech, sr = sf.read("/work/notes/audio/complete_16k.wav", dtype="int16"); assert sr == SR
CUT_AT = 1.18  # seconds: end of "book a" (espeak prefix "I would like to book a" ends its speech at 1.166 s; t-closure of "table" follows)
cut = speech[: int(CUT_AT * SR)]
def sil(secs): return np.zeros(int(secs * SR), dtype=np.int16)

report = {"onnxruntime": ort.__version__}

# ---------- Silero VAD: probabilities over time (pipecat SileroVADAnalyzer, default VADParams) ----------
def vad_trace(pcm):
    vad = SileroVADAnalyzer(sample_rate=SR)          # default VADParams
    vad.set_sample_rate(SR)
    rows = []
    for i in range(0, len(pcm) - 511, 512):
        buf = pcm[i:i+512].tobytes()
        # replicate VADAnalyzer._run_analyzer for one window but also capture confidence
        conf = float(np.asarray(vad.voice_confidence(buf)).ravel()[0])
        vol = vad._get_smoothed_volume(buf); vad._prev_volume = vol
        rows.append((round((i + 512) / SR, 3), round(conf, 4), round(float(vol), 3)))
    return rows, vad.params

def vad_states(pcm, chunk=320):
    """Feed 20 ms chunks through the real analyzer (confidence+volume+state machine)."""
    import asyncio
    vad = SileroVADAnalyzer(sample_rate=SR); vad.set_sample_rate(SR)
    out = []; prev = None
    for i in range(0, len(pcm) - chunk + 1, chunk):
        st = vad._run_analyzer(pcm[i:i+chunk].tobytes())
        if st != prev: out.append((round((i + chunk) / SR, 3), st.name)); prev = st
    return out

sig_complete = np.concatenate([sil(0.5), speech, sil(1.0)])
rows, params = vad_trace(sig_complete)
report["vad_params_default"] = params.model_dump()
report["silero_trace_complete"] = rows
report["vad_state_changes_complete"] = vad_states(sig_complete)
sig_cut = np.concatenate([sil(0.5), cut, sil(1.0)])
report["vad_state_changes_cut"] = vad_states(sig_cut)

# raw model I/O for a Rust numerical check: first 3 speech windows, incl. context & state
m = SileroOnnxModel(os.path.join(os.path.dirname(sys.modules["pipecat.audio.vad.silero"].__file__), "data/silero_vad.onnx"))
x = sig_complete.astype(np.float32) / 32768.0
silero_ref = []
for k in range(12, 24):               # windows 12..23 (0.384 s .. 0.768 s): silence->speech onset
    w = x[k*512:(k+1)*512]
    ctx_before = m._context.copy(); st_before = m._state.copy()
    p = float(m(w, SR)[0, 0])
    silero_ref.append({"window_index": k, "prob": p})
np.save(f"{OUT}/silero_input_pcm_f32.npy", x)   # whole signal; windows of 512, context 64 zero at start

# ---------- Smart Turn ----------
st = LocalSmartTurnAnalyzerV3(cpu_count=1)
st.set_sample_rate(SR)
def smart_turn(seg_int16):
    seg = seg_int16.astype(np.float32) / 32768.0      # as BaseSmartTurn._process_speech_segment
    return st._predict_endpoint(seg)

# pipecat's segment: pre_speech_ms (500) + vad start_secs (0.2) before speech start,
# then speech, then the VAD stop_secs (0.2 s) of silence that elapses before VADUserStoppedSpeaking.
seg_complete = np.concatenate([sil(0.5), speech[: len(speech) - 0], sil(0.2)])
seg_cut = np.concatenate([sil(0.5), cut, sil(0.2)])
res = {}
for name, seg in (("complete", seg_complete), ("cut", seg_cut),
                  ("complete_no_trailing_silence", speech), ("cut_no_trailing_silence", cut)):
    r = smart_turn(seg); res[name] = {"seconds": round(len(seg) / SR, 3), **r}
report["smart_turn"] = res

# reference features + output for the Rust check
for name, seg in (("complete", seg_complete), ("cut", seg_cut)):
    f32 = seg.astype(np.float32) / 32768.0
    padded = np.pad(f32, (128000 - len(f32), 0))     # front-padded as truncate_audio_to_last_n_seconds
    feats = compute_whisper_log_mel_features(padded, do_normalize=True)
    prob = float(st._session.run(None, {"input_features": feats[None]})[0][0, 0])
    np.save(f"{OUT}/smart_turn_{name}_audio_f32_128000.npy", padded.astype(np.float32))
    np.save(f"{OUT}/smart_turn_{name}_input_features_1x80x800.npy", feats[None].astype(np.float32))
    res[name]["reference_prob_recomputed"] = prob
    res[name]["features_stats"] = {"min": float(feats.min()), "max": float(feats.max()), "mean": float(feats.mean()),
                                    "first5_mel0": feats[0, :5].tolist(), "last5_mel79": feats[79, -5:].tolist()}
np.save(f"{OUT}/whisper_mel_filters_201x80_f64.npy", _MEL_FILTERS)
np.save(f"{OUT}/hann_window_400_f64.npy", _HANN_WINDOW)

# ---------- timing: 50 runs, intra_op_num_threads=1 ----------
def timeit(fn, n=50, warm=5):
    for _ in range(warm): fn()
    t = time.perf_counter()
    for _ in range(n): fn()
    return (time.perf_counter() - t) / n * 1000
so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
sv = ort.InferenceSession(os.path.join(os.path.dirname(sys.modules["pipecat.audio.vad.silero"].__file__), "data/silero_vad.onnx"), so, providers=["CPUExecutionProvider"])
vin = {"input": np.zeros((1, 576), np.float32) + x[12000:12576][None], "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}
feats = np.load(f"{OUT}/smart_turn_complete_input_features_1x80x800.npy")
padded = np.load(f"{OUT}/smart_turn_complete_audio_f32_128000.npy")
report["timing_ms_avg_of_50_single_thread"] = {
    "silero_one_512_window": timeit(lambda: sv.run(None, vin)),
    "smart_turn_session_run_only": timeit(lambda: st._session.run(None, {"input_features": feats})),
    "whisper_features_numpy": timeit(lambda: compute_whisper_log_mel_features(padded)),
    "smart_turn_predict_endpoint_total": timeit(lambda: smart_turn(seg_complete)),
}
report["silero_reference_windows"] = silero_ref
json.dump(report, open(f"{OUT}/verify_report.json", "w"), indent=1)
print(json.dumps({k: v for k, v in report.items() if k != "silero_trace_complete"}, indent=1))
print("silero trace (t_end_s, prob, smoothed_volume):")
print("  ".join(f"{t:.3f}:{p:.2f}/{v:.2f}" for t, p, v in rows))
