// The session page's script. Written by hand, no library: it reads the session-data JSON
// block and builds the page with createElement/textContent only (the page's policy turns
// every HTML-string sink off), so nothing a session holds can become markup or script.
// Large sessions: the tree is a virtual list (only visible rows exist) and the
// conversation renders in windows of entries, more as one scrolls.
(function () {
  'use strict';

  var ROW = 20;        // tree row height, px (matches --row in the stylesheet)
  var CHUNK = 80;      // entries rendered per window step
  var LONG_LINES = 12; // tool output longer than this folds (O unfolds)
  var SAFE_MIME = { 'image/png': 1, 'image/jpeg': 1, 'image/gif': 1, 'image/webp': 1, 'image/bmp': 1 };
  var SETTINGS = { label: 1, custom: 1, context_edit: 1, model_change: 1, thinking_level_change: 1, session_info: 1 };

  function $(id) { return document.getElementById(id); }

  // ---------------------------------------------------------------- data
  var raw = $('session-data').textContent;
  var meta, lines, problems = [];
  try {
    var data = JSON.parse(raw);
    meta = data.meta; lines = data.lines;
  } catch (err) {
    // One bad line must not take the page down: read the lines one by one.
    var parts = raw.split('\n');
    meta = JSON.parse(parts[0] + ']}').meta;
    lines = [];
    for (var k = 1; k < parts.length - 1; k++) {
      var t = parts[k];
      if (t.charAt(t.length - 1) === ',') t = t.slice(0, -1);
      try { lines.push(JSON.parse(t)); } catch (e2) { lines.push(null); problems.push('line ' + k + ' could not be read'); }
    }
  }
  var header = obj(lines[0]);
  var n = Math.max(0, lines.length - 1);
  function entry(i) { return obj(lines[i + 1]); }

  var parent = meta.parent || [];
  var kids = new Array(n);
  var order = (meta.order || []).slice();
  for (var i = 0; i < n; i++) if (parent[i] === -2 || parent[i] === undefined) order.push(i);
  order.forEach(function (idx) {
    var p = parent[idx];
    if (p >= 0) (kids[p] || (kids[p] = [])).push(idx);
  });
  var roots = order.filter(function (idx) { return !(parent[idx] >= 0); });
  var indent = new Int32Array(n);
  order.forEach(function (idx) {
    var p = parent[idx];
    indent[idx] = p >= 0 ? indent[p] + (kids[p].length > 1 ? 1 : 0) : (roots.length > 1 ? 1 : 0);
  });
  var labelOf = new Map();
  (meta.labels || []).forEach(function (pair) { labelOf.set(pair[0], pair[1]); });

  // ---------------------------------------------------------------- value helpers
  function obj(v) { return v && typeof v === 'object' && !Array.isArray(v) ? v : {}; }
  function str(v) { return typeof v === 'string' ? v : ''; }
  function blocks(content) {
    if (typeof content === 'string') return [{ type: 'text', text: content }];
    return Array.isArray(content) ? content.map(obj) : [];
  }
  function textOf(content) {
    return blocks(content).filter(function (b) { return b.type === 'text' && typeof b.text === 'string'; })
      .map(function (b) { return b.text; }).join('\n\n');
  }
  function systemText(m) {
    var t = textOf(m.content);
    var s = obj(m.sections);
    var parts = t ? [t] : [];
    Object.keys(s).forEach(function (k) { if (typeof s[k] === 'string' && s[k]) parts.push(s[k]); });
    return parts.join('\n\n');
  }
  function json(v) { try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); } }
  function role(e) { return e.type === 'message' ? str(obj(e.message).role) : ''; }
  function modelOf(m) {
    var p = str(m.provider), id = str(m.model);
    return p && id ? p + '/' + id : (id || p);
  }
  function toolCallOnly(e) {
    if (role(e) !== 'assistant') return false;
    var m = obj(e.message);
    if (m.stopReason === 'error' || m.stopReason === 'aborted') return false;
    return !blocks(m.content).some(function (b) { return b.type === 'text' && str(b.text).trim(); });
  }

  // Control characters would be invisible or worse: colour codes go, the rest show as
  // their control pictures (␛, ␇ …).
  function clean(s) {
    return s.replace(/\r\n/g, '\n').replace(/\x1b\[[0-9;]*m/g, '')
      .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, function (c) {
        var code = c.charCodeAt(0);
        return String.fromCharCode(code === 0x7f ? 0x2421 : 0x2400 + code);
      });
  }
  function oneLine(s, max) {
    s = clean(s).replace(/\s+/g, ' ').trim();
    return s.length > max ? s.slice(0, max - 1) + '…' : s;
  }

  // ---------------------------------------------------------------- DOM helpers
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = clean(String(text));
    return node;
  }
  function add(parentNode) {
    for (var a = 1; a < arguments.length; a++) if (arguments[a]) parentNode.appendChild(arguments[a]);
    return parentNode;
  }
  function safeUrl(u) {
    try {
      var url = new URL(u);
      return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
    } catch (e) { return null; }
  }
  function link(url, text) {
    var href = safeUrl(url);
    if (!href) return document.createTextNode(clean(text === url ? url : '[' + text + '](' + url + ')'));
    var a = el('a', null, text);
    a.href = href;
    a.rel = 'noopener noreferrer';
    a.target = '_blank';
    return a;
  }

  // Inline Markdown that helps reading — `code`, **bold**, [text](url), bare URLs — as
  // elements; everything else stays the text it is.
  var INLINE = /(`[^`\n]+`)|\*\*([^*\n]+)\*\*|\[([^\]\n]{1,500})\]\(([^()\s]{1,2000})\)|(https?:\/\/[^\s<>"'`)\]]+)/g;
  function inline(s, into) {
    var last = 0, m;
    INLINE.lastIndex = 0;
    while ((m = INLINE.exec(s)) !== null) {
      if (m.index > last) into.appendChild(document.createTextNode(clean(s.slice(last, m.index))));
      if (m[1]) into.appendChild(el('code', null, m[1].slice(1, -1)));
      else if (m[2]) into.appendChild(el('strong', null, m[2]));
      else if (m[3]) into.appendChild(link(m[4], m[3]));
      else {
        // A sentence's full stop is not part of the URL.
        var url = m[5].replace(/[.,;:!?]+$/, '');
        into.appendChild(link(url, url));
        if (url.length < m[5].length) into.appendChild(document.createTextNode(m[5].slice(url.length)));
      }
      last = INLINE.lastIndex;
    }
    if (last < s.length) into.appendChild(document.createTextNode(clean(s.slice(last))));
  }
  // Message text: fenced code as <pre>, the rest inline.
  function textBlock(s, cls) {
    var div = el('div', cls || 'text');
    var fence = /^(```|~~~)[^\n]*\n([\s\S]*?)^\1[ \t]*$/gm;
    var last = 0, m;
    while ((m = fence.exec(s)) !== null) {
      if (m.index > last) inline(s.slice(last, m.index), div);
      div.appendChild(el('pre', null, m[2].replace(/\n$/, '')));
      last = fence.lastIndex;
    }
    if (last < s.length) inline(s.slice(last), div);
    return div;
  }
  function output(s) {
    s = clean(s);
    var lineCount = s.split('\n').length;
    var pre = el('pre', 'out');
    pre.textContent = s;
    if (lineCount <= LONG_LINES && s.length <= 3000) return pre;
    pre.classList.add('long');
    var wrap = el('div');
    var more = el('button', 'more', 'Show all ' + lineCount + ' lines');
    more.type = 'button';
    more.addEventListener('click', function () {
      var open = pre.classList.toggle('open');
      more.textContent = open ? 'Fold' : 'Show all ' + lineCount + ' lines';
    });
    return add(wrap, pre, more);
  }
  function image(b) {
    var mime = str(b.mimeType), data = str(b.data);
    if (!SAFE_MIME[mime] || !/^[A-Za-z0-9+/=]+$/.test(data)) return el('p', 'note', '[image of type ' + mime + ' not shown]');
    var img = el('img', 'image');
    img.alt = 'image';
    img.src = 'data:' + mime + ';base64,' + data;
    return img;
  }

  // ---------------------------------------------------------------- entries
  function ts(e) {
    var t = str(e.timestamp);
    return t ? t.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '';
  }
  function card(i, cls, roleName) {
    var e = entry(i);
    var div = el('div', 'entry ' + cls);
    div.id = 'e-' + i;
    var head = el('div', 'head');
    add(head, el('span', 'role', roleName), el('span', null, ts(e)));
    if (typeof e.id === 'string') add(head, el('span', 'eid', '#' + e.id));
    if (labelOf.has(i)) add(head, el('span', 'badge', labelOf.get(i)));
    return add(div, head);
  }
  function contentBlocks(content, into) {
    blocks(content).forEach(function (b) {
      if (b.type === 'text' && typeof b.text === 'string') into.appendChild(textBlock(b.text));
      else if (b.type === 'thinking' && typeof b.thinking === 'string') {
        var th = el('div', 'thinking');
        add(th, el('div', 'folded', 'Thinking… (T shows it)'), textBlock(b.thinking, 'text body'));
        into.appendChild(th);
      } else if (b.type === 'toolCall') {
        var call = el('div', 'tool-call');
        add(call, el('div', 'name', str(b.name) + (b.id ? '  ' + str(b.id) : '')));
        var args = obj(b.arguments);
        var keys = Object.keys(args);
        add(call, el('pre', 'args', keys.length === 1 && typeof args.command === 'string' ? args.command : json(b.arguments)));
        into.appendChild(call);
      } else if (b.type === 'image') into.appendChild(image(b));
      else into.appendChild(el('pre', 'raw', json(b)));
    });
  }
  function renderEntry(i) {
    var e = entry(i), m = obj(e.message), div;
    switch (e.type) {
      case 'message':
        switch (m.role) {
          case 'user':
            div = card(i, 'user', 'User');
            contentBlocks(m.content, div);
            return div;
          case 'assistant': {
            var err = m.stopReason === 'error' || m.stopReason === 'aborted';
            div = card(i, 'assistant' + (err ? ' error' : ''), 'Assistant');
            var model = modelOf(m);
            if (model) div.firstChild.appendChild(el('span', 'eid', model));
            contentBlocks(m.content, div);
            if (err) add(div, el('p', 'error-text', 'stopped: ' + m.stopReason + (m.errorMessage ? ' — ' + str(m.errorMessage) : '')));
            var u = obj(m.usage);
            if (m.usage) add(div, el('p', 'note', (u.input || 0) + ' in · ' + (u.output || 0) + ' out · ' + (u.cacheRead || 0) + ' cache read · ' + (u.cacheWrite || 0) + ' cache write tokens'));
            return div;
          }
          case 'toolResult':
            div = card(i, 'tool-result' + (m.isError === true ? ' is-error' : ''), 'Tool result' + (m.toolName ? ': ' + str(m.toolName) : '') + (m.isError === true ? ' (error)' : ''));
            blocks(m.content).forEach(function (b) {
              if (b.type === 'text' && typeof b.text === 'string') div.appendChild(output(b.text));
              else if (b.type === 'image') div.appendChild(image(b));
              else div.appendChild(el('pre', 'raw', json(b)));
            });
            return div;
          case 'bashExecution':
            div = card(i, 'bash', 'Bash');
            add(div, el('pre', 'command', '$ ' + str(m.command)), output(str(m.output)));
            if (m.exitCode !== undefined && m.exitCode !== null) add(div, el('p', 'note', 'exit code ' + m.exitCode));
            if (m.cancelled) add(div, el('p', 'note', 'cancelled'));
            if (m.truncated) add(div, el('p', 'note', 'output truncated'));
            if (m.excludeFromContext) add(div, el('p', 'note', 'not sent to the model (!! command)'));
            return div;
          case 'compactionSummary':
          case 'branchSummary':
            div = card(i, 'summary', m.role === 'branchSummary' ? 'Branch summary' : 'Compaction summary');
            return add(div, textBlock(str(m.summary)));
          case 'system': {
            div = card(i, 'system', 'System prompt');
            var det = el('details');
            var text = systemText(m);
            add(det, el('summary', null, 'show (' + text.length + ' characters)'), el('pre', 'system-text', text));
            var tools = (Array.isArray(m.toolsAdded) ? m.toolsAdded : []).map(function (t) { return str(obj(t).name); });
            if (tools.length) add(det, el('p', 'note', 'tools: ' + tools.join(', ')));
            return add(div, det);
          }
          case 'custom':
            div = card(i, 'custom' + (m.display === false ? ' hidden-msg' : ''), 'Custom: ' + str(m.customType));
            contentBlocks(m.content, div);
            return div;
          default:
            div = card(i, 'other', 'Message: ' + str(m.role));
            return add(div, el('pre', 'raw', json(m)));
        }
      case 'compaction': {
        div = card(i, 'compaction', 'Compaction');
        var body = textBlock(str(e.summary), 'text out long');
        add(div, body, el('p', 'note', (e.tokensBefore ? e.tokensBefore + ' tokens before; ' : '') + 'kept from #' + str(e.firstKeptEntryId) + ' (O unfolds)'));
        return div;
      }
      case 'branch_summary':
        div = card(i, 'branch-summary', 'Branch summary');
        add(div, textBlock(str(e.summary)));
        if (e.fromId) add(div, el('p', 'note', 'summarised the branch left at #' + str(e.fromId)));
        return div;
      case 'custom_message':
        div = card(i, 'custom' + (e.display === false ? ' hidden-msg' : ''), '[' + str(e.customType) + ']' + (e.display === false ? ' hidden in the terminal' : ''));
        contentBlocks(e.content, div);
        return div;
      case 'model_change':
        return add(card(i, 'setting', 'Model'), el('span', null, str(e.provider) + '/' + str(e.modelId)));
      case 'thinking_level_change':
        return add(card(i, 'setting', 'Thinking level'), el('span', null, str(e.thinkingLevel)));
      case 'label':
        return add(card(i, 'setting', 'Label'), el('span', null, (e.label ? '“' + str(e.label) + '” on #' : 'label cleared on #') + str(e.targetId)));
      case 'session_info':
        return add(card(i, 'setting', 'Name'), el('span', null, str(e.name)));
      case 'custom': {
        div = card(i, 'setting hidden-msg', 'Extension data: ' + str(e.customType));
        return add(div, el('pre', 'raw', json(e.data)));
      }
      default:
        div = card(i, 'other', str(e.type) || 'Entry');
        return add(div, el('pre', 'raw', json(lines[i + 1])));
    }
  }

  // One line for the tree.
  function rowText(i) {
    var e = entry(i), m = obj(e.message);
    switch (e.type) {
      case 'message':
        switch (m.role) {
          case 'user': return ['user', textOf(m.content)];
          case 'assistant': {
            var t = textOf(m.content);
            if (!t.trim()) {
              var names = blocks(m.content).filter(function (b) { return b.type === 'toolCall'; }).map(function (b) { return str(b.name); });
              t = names.length ? '[' + names.join(', ') + ']' : (m.errorMessage ? str(m.errorMessage) : '');
            }
            return ['assistant', t];
          }
          case 'toolResult': return ['tool ' + str(m.toolName), textOf(m.content)];
          case 'bashExecution': return ['bash', '$ ' + str(m.command)];
          case 'compactionSummary': return ['compaction', str(m.summary)];
          case 'branchSummary': return ['branch summary', str(m.summary)];
          case 'system': return ['system', 'system prompt'];
          case 'custom': return ['custom', textOf(m.content)];
          default: return [str(m.role) || 'message', ''];
        }
      case 'compaction': return ['compaction', str(e.summary)];
      case 'branch_summary': return ['branch summary', str(e.summary)];
      case 'model_change': return ['model', str(e.provider) + '/' + str(e.modelId)];
      case 'thinking_level_change': return ['thinking', str(e.thinkingLevel)];
      case 'label': return ['label', (e.label ? str(e.label) : '(cleared)') + ' → #' + str(e.targetId)];
      case 'session_info': return ['name', str(e.name)];
      case 'custom_message': return ['[' + str(e.customType) + ']', textOf(e.content)];
      case 'custom': return ['extension', str(e.customType)];
      default: return [str(e.type) || 'entry', ''];
    }
  }

  // Everything a reader might look for in an entry, lower-cased, computed on first search.
  var searchCache = null;
  function searchText(i) {
    var e = entry(i), m = obj(e.message), parts = [];
    if (labelOf.has(i)) parts.push(labelOf.get(i));
    parts.push(e.type || '', typeof e.id === 'string' ? e.id : '');
    if (e.type === 'message') {
      parts.push(str(m.role), str(m.toolName), str(m.command), str(m.output), str(m.summary), str(m.errorMessage), modelOf(m));
      if (m.role === 'system') parts.push(systemText(m));
      blocks(m.content).forEach(function (b) {
        parts.push(str(b.text), str(b.thinking), str(b.name));
        if (b.type === 'toolCall') parts.push(json(b.arguments));
      });
    } else {
      parts.push(str(e.summary), str(e.customType), str(e.provider), str(e.modelId), str(e.thinkingLevel), str(e.label), str(e.name), textOf(e.content));
    }
    return parts.join('\n').toLowerCase();
  }

  // ---------------------------------------------------------------- state
  var filter = 'default';
  var query = [];
  var selected = -1;     // the entry the reader chose
  var path = [];         // entries shown in the conversation, root first
  var onPath = new Uint8Array(n);
  var rows = [];         // tree rows for the current filter and search
  var win = { lo: 0, hi: 0 };

  function pathTo(i) {
    var out = [], guard = 0;
    while (i >= 0 && guard++ <= n) { out.push(i); i = parent[i] >= 0 ? parent[i] : -1; }
    return out.reverse();
  }
  function newestLeaf(i) {
    var guard = 0;
    while (kids[i] && kids[i].length && guard++ <= n) i = kids[i][kids[i].length - 1];
    return i;
  }
  function passes(i) {
    if (i === selected) return true;
    var e = entry(i);
    switch (filter) {
      case 'user': return role(e) === 'user';
      case 'labeled': return labelOf.has(i);
      case 'all': return true;
      default:
        if (SETTINGS[e.type] || toolCallOnly(e)) return false;
        return !(filter === 'no-tools' && role(e) === 'toolResult');
    }
  }
  function matches(i) {
    if (!query.length) return true;
    if (!searchCache) { searchCache = new Array(n); }
    var t = searchCache[i];
    if (t === undefined) t = searchCache[i] = searchText(i);
    for (var q = 0; q < query.length; q++) if (t.indexOf(query[q]) < 0) return false;
    return true;
  }

  // ---------------------------------------------------------------- tree (virtual list)
  var tree = $('tree'), spacer = $('tree-spacer');
  function rebuildRows() {
    rows = order.filter(function (i) { return passes(i) && (i === selected || matches(i)); });
    spacer.style.height = rows.length * ROW + 'px';
    var status = rows.length + ' / ' + n + ' entries';
    if (query.length) status += ' match “' + query.join(' ') + '”';
    $('tree-status').textContent = status;
    drawTree();
  }
  function drawTree() {
    var top = tree.scrollTop, h = tree.clientHeight || 800;
    var first = Math.max(0, Math.floor(top / ROW) - 10);
    var last = Math.min(rows.length, Math.ceil((top + h) / ROW) + 10);
    var frag = document.createDocumentFragment();
    for (var r = first; r < last; r++) frag.appendChild(treeRow(rows[r], r));
    spacer.replaceChildren(frag);
  }
  function treeRow(i, r) {
    var div = el('div', 'row' + (onPath[i] ? ' on-path' : '') + (i === selected ? ' selected' : ''));
    div.style.top = r * ROW + 'px';
    div.style.paddingLeft = 4 + indent[i] * 14 + 'px';
    div.dataset.idx = String(i);
    var p = parent[i], sib = p >= 0 ? kids[p] : null;
    var glyph = sib && sib.length > 1 ? (sib[sib.length - 1] === i ? '└ ' : '├ ') : '';
    var rt = rowText(i);
    if (glyph) div.appendChild(document.createTextNode(glyph));
    if (labelOf.has(i)) div.appendChild(el('span', 'lbl', oneLine(labelOf.get(i), 40)));
    add(div, el('span', 'role', rt[0] + ': '), document.createTextNode(oneLine(rt[1], 160)));
    div.title = rt[0] + (typeof entry(i).id === 'string' ? ' #' + entry(i).id : '');
    return div;
  }
  tree.addEventListener('scroll', function () { requestAnimationFrame(drawTree); });
  window.addEventListener('resize', function () { requestAnimationFrame(drawTree); });
  spacer.addEventListener('click', function (ev) {
    var row = ev.target.closest('.row');
    if (row) navigate(Number(row.dataset.idx), true);
  });

  // ---------------------------------------------------------------- conversation (windowed)
  var list = $('messages');
  var sentinel = el('div', 'sentinel');
  var earlier = el('button', 'load-more');
  earlier.type = 'button';
  earlier.addEventListener('click', function () { showEarlier(); });

  function navigate(i, fromTree) {
    if (i < 0 || i >= n) return;
    selected = i;
    onPath.fill(0);
    path = pathTo(newestLeaf(i));
    path.forEach(function (p) { onPath[p] = 1; });
    var at = path.indexOf(i);
    win.lo = Math.max(0, at - 10);
    win.hi = Math.min(path.length, win.lo + CHUNK);
    renderWindow();
    var e = entry(i);
    $('path-info').textContent = 'Path to ' + (typeof e.id === 'string' ? '#' + e.id : 'entry ' + i) + ': ' +
      path.length + ' entries, root to the newest leaf below it' + (path[path.length - 1] === meta.leaf ? ' (the active branch)' : '');
    var target = $('e-' + i);
    if (target) { target.classList.add('target'); if (fromTree) target.scrollIntoView({ block: 'start' }); }
    rebuildRows();
    if (!fromTree) scrollTreeTo(i);
  }
  function scrollTreeTo(i) {
    var r = rows.indexOf(i);
    if (r >= 0) tree.scrollTop = Math.max(0, r * ROW - (tree.clientHeight || 600) / 2);
    drawTree();
  }
  function renderWindow() {
    var frag = document.createDocumentFragment();
    if (win.lo > 0) { earlier.textContent = 'Show earlier entries (' + win.lo + ' more)'; frag.appendChild(earlier); }
    for (var k = win.lo; k < win.hi; k++) frag.appendChild(renderEntry(path[k]));
    frag.appendChild(sentinel);
    list.replaceChildren(frag);
  }
  function showMore() {
    if (win.hi >= path.length) return;
    var to = Math.min(path.length, win.hi + CHUNK);
    var frag = document.createDocumentFragment();
    for (var k = win.hi; k < to; k++) frag.appendChild(renderEntry(path[k]));
    list.insertBefore(frag, sentinel);
    win.hi = to;
  }
  function showEarlier() {
    var content = $('content');
    var from = Math.max(0, win.lo - CHUNK);
    var before = content.scrollHeight;
    var frag = document.createDocumentFragment();
    for (var k = from; k < win.lo; k++) frag.appendChild(renderEntry(path[k]));
    list.insertBefore(frag, earlier.nextSibling);
    win.lo = from;
    if (win.lo === 0) earlier.remove();
    else earlier.textContent = 'Show earlier entries (' + win.lo + ' more)';
    content.scrollTop += content.scrollHeight - before;
  }
  if ('IntersectionObserver' in window) {
    new IntersectionObserver(function (items) {
      if (items.some(function (it) { return it.isIntersecting; })) showMore();
    }, { root: $('content'), rootMargin: '800px' }).observe(sentinel);
  }

  // ---------------------------------------------------------------- header and totals
  function fact(dl, name, value, id) {
    if (value === '' || value === null || value === undefined) return;
    var dd = el('dd', null, value);
    if (id) dd.id = id;
    add(dl, el('dt', null, name), dd);
  }
  function renderHeader() {
    var title = str(meta.title) || 'Session';
    $('title').textContent = clean(title);
    document.title = oneLine(title, 120) + ' · pi';
    var facts = $('facts');
    var leaves = 0;
    for (var i = 0; i < n; i++) if (!kids[i]) leaves++;
    fact(facts, 'Session', str(header.id));
    fact(facts, 'Directory', str(header.cwd));
    fact(facts, 'Started', str(header.timestamp));
    fact(facts, 'Forked from', str(header.parentSession));
    fact(facts, 'Entries', n + ' entries, ' + leaves + ' branch ends');
    fact(facts, 'Format', 'version ' + (header.version === undefined ? 1 : header.version) +
      (meta.migratedFrom ? ' (migrated from version ' + meta.migratedFrom + ' when loaded)' : ''));
    fact(facts, 'Exported by', str(meta.generator));

    var t = meta.totals || {}, r = t.roles || {};
    var totals = $('totals');
    var names = { user: 'user', assistant: 'assistant', tool: 'tool results', bash: 'bash', summary: 'summaries', custom: 'custom', system: 'system', other: 'other' };
    var byRole = Object.keys(r).map(function (k) { return r[k] + ' ' + (names[k] || k); }).join(', ');
    fact(totals, 'Models', (t.models || []).join(', ') || 'none', 'total-models');
    fact(totals, 'Messages', (t.messages || 0) + (byRole ? ' (' + byRole + ')' : ''), 'total-messages');
    fact(totals, 'Tool calls', (t.toolCalls || 0) + ' (' + (t.toolErrors || 0) + ' failed)', 'total-tool-calls');
    fact(totals, 'Assistant errors', String(t.errors || 0), 'total-errors');
    fact(totals, 'Tokens', 'input ' + (t.input || 0) + ' · output ' + (t.output || 0) + ' · cache read ' + (t.cacheRead || 0) + ' · cache write ' + (t.cacheWrite || 0), 'total-tokens');
    fact(totals, 'Cost', '$' + (t.cost || 0).toFixed(4), 'total-cost');
    var warn = problems.slice();
    if (meta.skippedLines) warn.unshift(meta.skippedLines + ' unreadable line(s) skipped when the session was read; see pi sessions verify.');
    if (warn.length) { $('warnings').textContent = warn.join(' '); $('warnings').hidden = false; }
  }

  // ---------------------------------------------------------------- toggles, search, download
  var thinkingShown = true, toolsOpen = false, hiddenShown = false;
  function setThinking(on) { thinkingShown = on; document.body.classList.toggle('thinking-hidden', !on); $('toggle-thinking').setAttribute('aria-pressed', String(on)); }
  function setTools(on) { toolsOpen = on; document.body.classList.toggle('tools-open', on); $('toggle-tools').setAttribute('aria-pressed', String(on)); }
  function setHidden(on) { hiddenShown = on; document.body.classList.toggle('show-hidden', on); $('toggle-hidden').setAttribute('aria-pressed', String(on)); }
  $('toggle-thinking').addEventListener('click', function () { setThinking(!thinkingShown); });
  $('toggle-tools').addEventListener('click', function () { setTools(!toolsOpen); });
  $('toggle-hidden').addEventListener('click', function () { setHidden(!hiddenShown); });
  document.addEventListener('keydown', function (ev) {
    var tag = ev.target && ev.target.tagName;
    if (ev.key === 'Escape') { search.value = ''; setQuery(''); return; }
    if (ev.ctrlKey || ev.metaKey || ev.altKey || tag === 'INPUT' || tag === 'TEXTAREA') return;
    var key = ev.key.toLowerCase();
    if (key === 't') setThinking(!thinkingShown);
    else if (key === 'o') setTools(!toolsOpen);
    else if (key === 'h') setHidden(!hiddenShown);
    else return;
    ev.preventDefault();
  });

  Array.prototype.forEach.call(document.querySelectorAll('.filter'), function (b) {
    b.addEventListener('click', function () {
      Array.prototype.forEach.call(document.querySelectorAll('.filter'), function (o) { o.classList.toggle('active', o === b); });
      filter = b.dataset.filter;
      rebuildRows();
    });
  });
  var search = $('search'), pending = 0;
  function setQuery(q) {
    query = q.toLowerCase().split(/\s+/).filter(Boolean);
    tree.scrollTop = 0;
    rebuildRows();
  }
  search.addEventListener('input', function () {
    clearTimeout(pending);
    pending = setTimeout(function () { setQuery(search.value); }, 120);
  });
  search.addEventListener('keydown', function (ev) {
    if (ev.key === 'Enter') { clearTimeout(pending); setQuery(search.value); if (rows.length) navigate(rows[0], true); }
  });

  // The session's lines as the block holds them, `\u003c` turned back into `<` where it
  // is an escape of ours (an even run of backslashes before it).
  $('download').addEventListener('click', function () {
    var parts = raw.split('\n'), out = [];
    for (var k = 1; k < parts.length - 1; k++) {
      var t = parts[k];
      if (t.charAt(t.length - 1) === ',') t = t.slice(0, -1);
      if (k === 1 && t === 'null') continue;
      out.push(t.replace(/(\\*)\\u003c/g, function (all, bs) { return bs.length % 2 === 0 ? bs + '<' : all; }));
    }
    var blob = new Blob([out.join('\n') + '\n'], { type: 'application/x-ndjson' });
    var a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = (str(header.id) || 'session') + '.jsonl';
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(a.href); }, 10000);
  });

  // ---------------------------------------------------------------- start
  // Deep links as Pi's page reads them: ?leafId=…&targetId=… (or #<entry id>).
  function indexOfId(id) {
    if (!id) return -1;
    for (var i = n - 1; i >= 0; i--) if (entry(i).id === id) return i;
    return -1;
  }
  var params = new URLSearchParams(location.search), fromHash = '';
  try { fromHash = decodeURIComponent(location.hash.slice(1)); } catch (e) { fromHash = ''; }
  var linked = indexOfId(params.get('targetId') || params.get('leafId') || fromHash);
  renderHeader();
  var start = meta.leaf >= 0 ? meta.leaf : n - 1;
  if (linked >= 0) {
    navigate(linked, true);
  } else if (start >= 0) {
    navigate(start, false);
    // The conversation starts at its beginning, as Pi's page does.
    win.lo = 0; win.hi = Math.min(path.length, CHUNK);
    renderWindow();
  } else {
    rebuildRows();
    list.appendChild(el('p', 'note', 'This session has no entries yet.'));
  }
  document.body.dataset.ready = '1';
})();
