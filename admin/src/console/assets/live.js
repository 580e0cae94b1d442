// xjob console: times in the zone the viewer picks, and live pages. Progressive enhancement:
// without this file every time shows in UTC (labelled) and pages refresh on reload.
//
// Zone: UTC, the browser's zone ("local") or each job's zone, picked in the header and kept in
// the `xjob_tz` cookie (`utc`, `local:Area/City`, `job`), which the server reads too: the runs
// filter reads typed times in the zone the page shows. A time the server wrote carries its
// instant (`data-ms`) and, when it belongs to a job, that job's zone (`data-tz`).
//
// Live: every element with `data-live` and an id is fetched again every few seconds (the same
// URL) and swapped in place when it changed, unless the viewer is typing in it or ticked a box
// in it. A button above the page turns this on and off (kept in localStorage).
(function () {
  'use strict';

  var COOKIE = 'xjob_tz';
  // The page's language (its `lang`, which the server picked from the xjob_lang cookie or the
  // browser's languages): this script's own words follow it.
  var ZH = /^zh/i.test(document.documentElement.lang || '');
  var WORDS = {
    showIn: ['Show times in', '时间显示为'],
    local: ['Local', '本地'],
    jobZone: ["Job's zone", '任务时区'],
    liveOn: ['Live updates: on', '自动刷新：开'],
    liveOff: ['Live updates: off', '自动刷新：关'],
    paused: ['paused', '已暂停'],
    updated: ['updated ', '已更新 '],
    noChange: [' (no change)', '（无变化）'],
    notUpdated: ['not updated: ', '未更新：']
  };
  function word(key) { return WORDS[key][ZH ? 1 : 0]; }
  var LIVE_KEY = 'xjob_live';
  var PERIOD_MS = 4000;

  function browserZone() {
    try { return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'; } catch (e) { return 'UTC'; }
  }

  function readCookie() {
    var found = document.cookie.split(';').map(function (part) { return part.trim(); })
      .filter(function (part) { return part.indexOf(COOKIE + '=') === 0; })[0];
    return found ? found.slice(COOKIE.length + 1) : '';
  }

  // 'utc', 'local' or 'job'.
  function mode() {
    var value = readCookie();
    if (value === 'job') { return 'job'; }
    if (value.indexOf('local:') === 0) { return 'local'; }
    return 'utc';
  }

  function choose(value) {
    var stored = value === 'local' ? 'local:' + browserZone() : value;
    var secure = location.protocol === 'https:' ? '; Secure' : '';
    document.cookie = COOKIE + '=' + stored + '; Path=/; Max-Age=31536000; SameSite=Strict' + secure;
  }

  // The zone a time is shown in: `jobZone` is the zone of the job it belongs to, if any.
  function zoneFor(jobZone) {
    switch (mode()) {
      case 'local': return browserZone();
      case 'job': return jobZone || 'UTC';
      default: return 'UTC';
    }
  }

  var formats = {};
  function formatter(zone) {
    if (!formats[zone]) {
      formats[zone] = new Intl.DateTimeFormat('en-US', {
        timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit',
        minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short'
      });
    }
    return formats[zone];
  }

  // `2024-05-01 13:30:00 GMT+2`: sortable, with its zone.
  function format(ms, zone) {
    var parts = {};
    var used = zone;
    try {
      formatter(zone).formatToParts(new Date(ms)).forEach(function (p) { parts[p.type] = p.value; });
    } catch (e) {
      used = 'UTC';
      formatter(used).formatToParts(new Date(ms)).forEach(function (p) { parts[p.type] = p.value; });
    }
    return parts.year + '-' + parts.month + '-' + parts.day + ' ' + parts.hour + ':' +
      parts.minute + ':' + parts.second + ' ' + parts.timeZoneName;
  }

  function show(root) {
    root.querySelectorAll('time[data-ms]').forEach(function (el) {
      var ms = Number(el.getAttribute('data-ms'));
      if (!(ms > 0)) { return; }
      var zone = zoneFor(el.getAttribute('data-tz'));
      el.textContent = format(ms, zone);
      el.title = new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') + ' · ' + zone;
      el.setAttribute('data-zone', zone);
    });
  }

  // What console.js uses for the schedule preview and after live swaps.
  window.xjobTime = {
    show: show,
    format: format,
    zoneFor: zoneFor
  };

  function picker() {
    var who = document.querySelector('header.top .who');
    if (!who) { return; }
    var label = document.createElement('label');
    label.htmlFor = 'tz-pick';
    label.className = 'sr-only';
    label.textContent = word('showIn');
    var select = document.createElement('select');
    select.id = 'tz-pick';
    select.className = 'small';
    [['utc', 'UTC'], ['local', word('local') + ' (' + browserZone() + ')'], ['job', word('jobZone')]]
      .forEach(function (choice) {
        var option = document.createElement('option');
        option.value = choice[0];
        option.textContent = choice[1];
        select.appendChild(option);
      });
    select.value = mode();
    // The browser moved to another zone since the choice was made: follow it.
    if (mode() === 'local' && readCookie() !== 'local:' + browserZone()) { choose('local'); }
    select.addEventListener('change', function () {
      choose(select.value);
      show(document);
      document.dispatchEvent(new Event('xjob:zone'));
      // The runs filter reads typed times in the zone shown: ask again in the new one.
      if (document.getElementById('filter-zone')) {
        var url = new URL(location.href);
        url.searchParams.delete('tz');
        location.replace(url.toString());
      }
    });
    who.insertBefore(select, who.firstChild);
    who.insertBefore(label, select);
  }

  function liveOn() {
    try { return localStorage.getItem(LIVE_KEY) !== 'off'; } catch (e) { return true; }
  }

  function setLive(on) {
    try { localStorage.setItem(LIVE_KEY, on ? 'on' : 'off'); } catch (e) { /* not kept */ }
  }

  // Whether the viewer is working in a region: typing, or boxes ticked for a bulk action.
  function busy(region) {
    var active = document.activeElement;
    if (active && region.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName)) {
      return true;
    }
    return region.querySelector('input[type=checkbox]:checked, details[open]') !== null;
  }

  function confirmations(root) {
    root.querySelectorAll('form[data-confirm]').forEach(function (form) {
      form.addEventListener('submit', function (event) {
        if (!window.confirm(form.getAttribute('data-confirm'))) { event.preventDefault(); }
      });
    });
  }

  var live = { refresh: function () {} };
  window.xjobLive = live;

  function liveRegions() {
    var regions = document.querySelectorAll('[data-live][id]');
    if (!regions.length) { return; }
    var bar = document.createElement('div');
    bar.className = 'live-bar';
    bar.id = 'live-bar';
    var button = document.createElement('button');
    button.type = 'button';
    button.id = 'live-toggle';
    button.className = 'small secondary';
    var note = document.createElement('span');
    note.className = 'hint';
    note.id = 'live-note';
    note.setAttribute('aria-live', 'polite');
    bar.appendChild(button);
    bar.appendChild(document.createTextNode(' '));
    bar.appendChild(note);
    var heading = document.querySelector('main h1');
    if (heading) { heading.insertAdjacentElement('afterend', bar); }
    var raw = {};
    var timer = null;
    var asking = false;

    function label() {
      var on = liveOn();
      button.textContent = on ? word('liveOn') : word('liveOff');
      button.setAttribute('aria-pressed', on ? 'true' : 'false');
      if (!on) { note.textContent = word('paused'); }
    }

    function schedule() {
      clearTimeout(timer);
      if (liveOn()) { timer = setTimeout(refresh, PERIOD_MS); }
    }

    function refresh() {
      if (asking) { return; }
      if (document.hidden) { schedule(); return; }
      asking = true;
      fetch(location.href, { credentials: 'same-origin', cache: 'no-store' })
        .then(function (response) {
          if (!response.ok || /\/login(\?|$)/.test(new URL(response.url).pathname)) {
            throw new Error('answered ' + response.status);
          }
          return response.text();
        })
        .then(function (text) {
          var fresh = new DOMParser().parseFromString(text, 'text/html');
          var changed = 0;
          document.querySelectorAll('[data-live][id]').forEach(function (region) {
            var next = fresh.getElementById(region.id);
            if (!next || busy(region) || raw[region.id] === next.innerHTML) { return; }
            raw[region.id] = next.innerHTML;
            var node = document.importNode(next, true);
            region.replaceWith(node);
            show(node);
            confirmations(node);
            changed += 1;
          });
          // Turned off meanwhile: the note keeps saying so.
          if (!liveOn()) { return; }
          note.textContent = word('updated') + format(Date.now(), zoneFor(null)).slice(11) +
            (changed ? '' : word('noChange'));
        })
        .catch(function (error) {
          if (liveOn()) { note.textContent = word('notUpdated') + error.message; }
        })
        .then(function () { asking = false; schedule(); });
    }

    button.addEventListener('click', function () {
      setLive(!liveOn());
      label();
      if (liveOn()) { refresh(); } else { clearTimeout(timer); }
    });
    document.addEventListener('visibilitychange', function () {
      if (!document.hidden && liveOn()) { refresh(); }
    });
    live.refresh = refresh;
    label();
    schedule();
  }

  document.addEventListener('DOMContentLoaded', function () {
    picker();
    show(document);
    liveRegions();
  });
})();
