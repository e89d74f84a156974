// The globals of AudioWorkletGlobalScope, which TypeScript's DOM library
// does not describe: the worklets (capture.js, playback.js) use these.
declare class AudioWorkletProcessor {
  readonly port: MessagePort;
  constructor();
}
declare function registerProcessor(name: string, processor: new () => AudioWorkletProcessor): void;
declare const sampleRate: number;
declare const currentTime: number;
