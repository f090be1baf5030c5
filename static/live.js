// Live updates for a channel page: new messages are appended as they are
// committed. Text only (textContent), never markup. The page works without it.
(function () {
  var main = document.querySelector("main[data-stream]");
  if (!main || !window.EventSource) return;
  var list = document.getElementById("messages");
  var url = main.dataset.stream + "?since_id=" + encodeURIComponent(main.dataset.lastId);
  var source = new EventSource(url);
  source.addEventListener("message", function (event) {
    var message = JSON.parse(event.data);
    if (document.getElementById("m" + message.id)) return;
    var article = document.createElement("article");
    article.id = "m" + message.id;
    var meta = document.createElement("p");
    meta.className = "meta";
    var kind = document.createElement("span");
    kind.className = "type";
    kind.textContent = message.type;
    var from = document.createElement("strong");
    from.textContent = message.from;
    meta.append(kind, " ", from, (message.to ? " to " + message.to : "") + " · " + message.created_at + " · #" + message.id);
    var body = document.createElement("pre");
    // Invisible characters shown as marks, as the server renders them.
    body.textContent = message.body.replace(
      /[\u00AD\u061C\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/g,
      function (c) { return "[U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + "]"; });
    article.append(meta, body);
    list.append(article);
  });
})();
