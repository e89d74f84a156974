/*! Parley webchat widget. Include with:
 *  <script src="https://YOUR-PARLEY/webchat/widget.js" data-channel="wc_…" async></script>
 *  Optional: data-title, data-color (#hex), data-open="true".
 *  Plain JavaScript, no dependencies (a call, when the channel offers it,
 *  imports /assets/lib/webcall-audio.js from Parley's origin: a page's CSP
 *  must allow that origin in script-src and connect-src, and the page must
 *  be https); renders inside a shadow root so the
 *  page's styles and the widget's never mix. Text is always set as text,
 *  never parsed as HTML.
 */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || !script.dataset.channel) {
    console.error("parley widget: add data-channel=\"wc_…\" to the script tag");
    return;
  }
  var channel = script.dataset.channel;
  var base = new URL(script.src, location.href);
  var socketUrl = (base.protocol === "https:" ? "wss:" : "ws:") + "//" + base.host + "/webchat/" + encodeURIComponent(channel);
  var storageKey = "parley:webchat:" + channel;
  var color = script.dataset.color || "#3b5bdb";

  var host = document.createElement("div");
  host.id = "parley-webchat";
  var root = host.attachShadow({ mode: "open" });
  root.innerHTML =
    "<style>" +
    ":host{all:initial}" +
    ".launcher{position:fixed;right:20px;bottom:20px;width:56px;height:56px;border-radius:50%;border:0;cursor:pointer;" +
    "background:" + color + ";color:#fff;display:flex;align-items:center;justify-content:center;box-shadow:0 4px 12px rgba(0,0,0,.25);z-index:2147483646}" +
    ".panel{position:fixed;right:20px;bottom:88px;width:340px;max-width:calc(100vw - 40px);height:460px;max-height:calc(100vh - 120px);" +
    "display:none;flex-direction:column;background:#fff;border-radius:12px;box-shadow:0 8px 30px rgba(0,0,0,.25);" +
    "font:14px/1.4 system-ui,sans-serif;color:#222;overflow:hidden;z-index:2147483647}" +
    ".panel.open{display:flex}" +
    ".head{background:" + color + ";color:#fff;padding:12px 14px;font-weight:600;display:flex;justify-content:space-between}" +
    ".state{font-weight:400;font-size:12px;opacity:.85}" +
    ".log{flex:1;overflow-y:auto;padding:12px;display:flex;flex-direction:column;gap:6px;background:#f6f7f9}" +
    ".msg{max-width:80%;padding:8px 10px;border-radius:10px;white-space:pre-wrap;word-wrap:break-word}" +
    ".msg.inbound{align-self:flex-end;background:" + color + ";color:#fff}" +
    ".msg.outbound,.msg.system{align-self:flex-start;background:#fff;border:1px solid #e3e5e8}" +
    ".msg a.file{display:block;color:inherit;margin-top:4px;text-decoration:underline}" +
    ".msg .meta{display:block;font-size:11px;opacity:.92;margin-top:2px;text-align:right}" +
    "form{display:flex;border-top:1px solid #e3e5e8}" +
    "textarea{flex:1;border:0;padding:10px;font:inherit;resize:none;height:44px;outline:none}" +
    "button.send{border:0;background:none;color:" + color + ";font-weight:600;padding:0 14px;cursor:pointer}" +
    ".call{border:1px solid rgba(255,255,255,.7);background:none;color:#fff;border-radius:12px;padding:2px 10px;font:inherit;font-size:12px;cursor:pointer;margin-left:8px}" +
    ".call[hidden]{display:none}" +
    "</style>" +
    "<button class='launcher' id='parley-launcher' aria-label='Chat with us'>" +
    "<svg width='26' height='26' viewBox='0 0 24 24' fill='none' stroke='currentColor' stroke-width='2' stroke-linecap='round' stroke-linejoin='round' aria-hidden='true'>" +
    "<path d='M21 15a2 2 0 0 1-2 2H7l-4 4V5a2 2 0 0 1 2-2h14a2 2 0 0 1 2 2z'/></svg></button>" +
    "<div class='panel' id='parley-panel' role='dialog' aria-label='Chat'>" +
    "<div class='head'><span id='parley-title'></span><span><span class='state' id='parley-state' role='status'>connecting…</span>" +
    "<button class='call' id='parley-call' type='button' hidden>Call</button></span></div>" +
    "<div class='log' id='parley-log' aria-live='polite'></div>" +
    "<form id='parley-form'><textarea id='parley-input' placeholder='Write a message…' aria-label='Message'></textarea>" +
    "<button class='send' id='parley-send' type='submit'>Send</button></form></div>";
  (document.body || document.documentElement).appendChild(host);

  var $ = function (id) { return root.getElementById(id); };
  var panel = $("parley-panel"), log = $("parley-log"), input = $("parley-input");
  $("parley-title").textContent = script.dataset.title || "Chat";

  var socket = null, ready = false, backoff = 1000;
  var outbox = [];        // frames waiting for a connection
  var bubbles = {};       // message id or client id -> element
  var unreadReplies = []; // reply ids shown but not yet reported read
  // A web call with the agent (when the channel offers it): the audio
  // module comes from Parley's origin; the microphone is opened before the
  // call is asked for, so a refusal places none.
  var callButton = $("parley-call");
  var audio = null;       // microphone and worklets, waiting for the call's token
  var call = null;        // the call under way
  var statusBeforeCall = "online";

  function callState(text) { $("parley-state").textContent = text; }

  function endCall(detail) {
    if (audio) { audio.close(); audio = null; }
    call = null;
    callButton.textContent = "Call";
    callButton.disabled = false;
    callState(ready ? statusBeforeCall : "reconnecting…");
    if (detail) bubble("call-" + Date.now(), "system", detail);
  }

  callButton.addEventListener("click", function () {
    if (call) { call.hangUp(); return; }
    if (audio) return;
    callButton.disabled = true;
    statusBeforeCall = $("parley-state").textContent;
    callState("starting a call…");
    import(base.origin + "/assets/lib/webcall-audio.js")
      .then(function (m) { return m.openAudio(base.origin); })
      .then(function (opened) { audio = opened; send({ type: "call" }); })
      .catch(function (e) { endCall(e && e.message ? e.message : String(e)); });
  });

  function joinCall(f) {
    if (!audio) return;
    var joining = audio;
    audio = null;
    call = joining.join({ url: f.url, token: f.token }, {
      onState: function (state, detail) {
        if (state === "talking") { callState("on a call"); callButton.textContent = "Hang up"; callButton.disabled = false; }
        else if (state === "ended") { call = null; endCall(detail); }
      },
      onStats: function (stats) { host.setAttribute("data-call-played", String(stats.played)); }
    });
    callState("calling…");
  }

  function isOpen() { return panel.classList.contains("open"); }

  function send(frame) {
    if (socket && ready && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(frame));
    else outbox.push(frame);
  }

  function meta(el, text) {
    var m = el.querySelector(".meta");
    if (!m) { m = document.createElement("span"); m.className = "meta"; el.appendChild(m); }
    m.textContent = text;
  }

  function bubble(key, direction, text) {
    var el = bubbles[key];
    if (!el) {
      el = document.createElement("div");
      el.className = "msg " + direction;
      el.setAttribute("data-testid", "parley-message");
      el.appendChild(document.createTextNode(text));
      log.appendChild(el);
      bubbles[key] = el;
      log.scrollTop = log.scrollHeight;
    }
    return el;
  }

  function reportRead() {
    if (!isOpen() || document.visibilityState === "hidden") return;
    while (unreadReplies.length) send({ type: "read", message_id: unreadReplies.shift() });
  }

  function show(m) {
    var fresh = !bubbles[m.id];
    var el = bubble(m.id, m.direction, m.text);
    el.setAttribute("data-message-id", String(m.id));
    if (fresh) (m.attachments || []).forEach(function (a) {
      if (!a.url || !/^https?:/.test(a.url)) return;
      var link = document.createElement("a");
      link.href = a.url;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      link.className = "file";
      link.textContent = a.filename;
      el.appendChild(link);
    });
    if (m.direction === "inbound") {
      meta(el, m.read ? "Read" : "Delivered");
    } else if (m.status !== "read" && unreadReplies.indexOf(m.id) < 0) {
      if (m.status === "sent") send({ type: "delivered", message_id: m.id });
      unreadReplies.push(m.id);
    }
  }

  function onFrame(f) {
    if (f.type === "ready") {
      ready = true;
      backoff = 1000;
      if (f.visitor_token) try { localStorage.setItem(storageKey, f.visitor_token); } catch (e) { /* private mode */ }
      if (!script.dataset.title && f.title) $("parley-title").textContent = f.title;
      if (!call) $("parley-state").textContent = "online";
      callButton.hidden = !f.calls;
      if (f.greeting && !log.firstChild) bubble("greeting", "system", f.greeting);
      (f.messages || []).forEach(show);
      var waiting = outbox; outbox = [];
      waiting.forEach(send);
      reportRead();
    } else if (f.type === "ack") {
      var el = bubbles[f.client_id];
      if (el) { delete bubbles[f.client_id]; bubbles[f.message.id] = el; el.setAttribute("data-message-id", String(f.message.id)); meta(el, "Delivered"); }
      else show(f.message);
    } else if (f.type === "message") {
      show(f.message);
      reportRead();
    } else if (f.type === "receipt") {
      var mine = bubbles[f.message_id];
      if (mine) meta(mine, f.status === "read" ? "Read" : "Delivered");
    } else if (f.type === "call") {
      joinCall(f);
    } else if (f.type === "error") {
      var failed = f.client_id && bubbles[f.client_id];
      if (failed) meta(failed, "Not sent: " + f.detail);
      else if (audio) endCall("The call could not start: " + f.detail);
      else console.warn("parley widget:", f.detail);
    }
  }

  function connect() {
    ready = false;
    $("parley-state").textContent = "connecting…";
    socket = new WebSocket(socketUrl);
    socket.onopen = function () {
      var token = null;
      try { token = localStorage.getItem(storageKey); } catch (e) { /* private mode */ }
      socket.send(JSON.stringify({ type: "hello", visitor_token: token }));
    };
    socket.onmessage = function (e) {
      try { onFrame(JSON.parse(e.data)); } catch (err) { console.warn("parley widget:", err); }
    };
    socket.onclose = function () {
      ready = false;
      $("parley-state").textContent = "reconnecting…";
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 30000);
    };
  }

  function newClientId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return "c" + Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  $("parley-launcher").addEventListener("click", function () {
    panel.classList.toggle("open");
    if (isOpen()) { input.focus(); reportRead(); }
  });
  $("parley-form").addEventListener("submit", function (e) {
    e.preventDefault();
    var text = input.value.trim();
    if (!text) return;
    var clientId = newClientId();
    meta(bubble(clientId, "inbound", text), "Sending…");
    send({ type: "message", text: text, client_id: clientId });
    input.value = "";
  });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("parley-form").requestSubmit(); }
  });
  document.addEventListener("visibilitychange", reportRead);
  if (script.dataset.open === "true") panel.classList.add("open");
  connect();
})();
