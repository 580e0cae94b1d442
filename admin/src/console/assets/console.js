// xjob console: progressive enhancement only. Every page works without this file; it adds
// local times, confirmations, the schedule preview as you type and the live run-log tail.
(function () {
  'use strict';

  // This script's own words, in the page's language (its `lang`, chosen by the server the way
  // the pages are: the xjob_lang cookie, else the browser's languages). Confirmations come
  // written in the page's language already (`data-confirm`).
  var ZH = /^zh/i.test(document.documentElement.lang || '');
  var WORDS = {
    browserZone: ["your browser's zone", '浏览器时区'],
    nextFires: ['Next fires ({}):', '接下来的触发时间（{}）：'],
    neverFires: ['Never fires.', '不会触发。'],
    following: ['live: following the log…', '实时：正在跟随日志…'],
    ended: ['run ended', '运行已结束']
  };
  function word(key, arg) { return WORDS[key][ZH ? 1 : 0].replace('{}', arg || ''); }

  function localize(root) {
    // live.js shows times in the zone the viewer picked; this is the fallback without it.
    if (window.xjobTime) { window.xjobTime.show(root); return; }
    root.querySelectorAll('time[data-ms]').forEach(function (el) {
      var ms = Number(el.getAttribute('data-ms'));
      if (ms > 0) { el.textContent = new Date(ms).toLocaleString(); }
    });
  }

  function confirmations() {
    document.querySelectorAll('form[data-confirm]').forEach(function (form) {
      form.addEventListener('submit', function (event) {
        if (!window.confirm(form.getAttribute('data-confirm'))) { event.preventDefault(); }
      });
    });
  }

  // The job editor: next fire times (PreviewSchedule) while typing, cron errors inline.
  function schedulePreview() {
    var form = document.getElementById('job-form');
    var out = document.getElementById('preview');
    if (!form || !out) { return; }
    var type = form.querySelector('[name=schedule_type]');
    var conf = form.querySelector('[name=schedule_conf]');
    var zone = form.querySelector('[name=time_zone]');
    var jitter = form.querySelector('[name=jitter_max_ms]');
    var calendar = form.querySelector('[name=calendar]');
    var calendarMode = form.querySelector('[name=calendar_mode]');
    var dstGap = form.querySelector('[name=dst_gap_policy]');
    var dstOverlap = form.querySelector('[name=dst_overlap_policy]');
    var overlap = form.querySelector('[name=overlap_policy]');
    // A saved job's jitter spreads its fires its own way: the preview asks for its id.
    var saved = /\/jobs\/(\d+)$/.exec(form.getAttribute('action') || '');
    // The preview names the field it refused (`time_zone`, `schedule_conf`, `jitter_max_ms`
    // or a DST policy): the error goes under that field, and the others are cleared.
    var errors = {
      schedule_conf: document.getElementById('err-schedule_conf'),
      time_zone: document.getElementById('err-time_zone'),
      jitter_max_ms: document.getElementById('err-jitter_max_ms'),
      calendar: document.getElementById('err-calendar'),
      dst_gap_policy: document.getElementById('err-dst_gap_policy'),
      dst_overlap_policy: document.getElementById('err-dst_overlap_policy')
    };
    function showError(field, text) {
      Object.keys(errors).forEach(function (name) {
        if (!errors[name]) { return; }
        var shown = text && (name === field || (!errors[field] && name === 'schedule_conf'));
        errors[name].textContent = shown ? text : '';
        errors[name].hidden = !shown;
      });
    }
    var timer = null;
    var asked = 0;
    function show() {
      var query = new URLSearchParams({
        schedule_type: type.value, schedule_conf: conf.value, time_zone: zone.value,
        jitter: jitter ? jitter.value : '', job_id: saved ? saved[1] : '0',
        calendar: calendar ? calendar.value : '',
        calendar_mode: calendarMode ? calendarMode.value : '',
        dst_gap: dstGap ? dstGap.value : '', dst_overlap: dstOverlap ? dstOverlap.value : '',
        overlap: overlap ? overlap.value : ''
      });
      var ticket = ++asked;
      fetch('/preview?' + query.toString(), { credentials: 'same-origin' })
        .then(function (response) { return response.json(); })
        .then(function (answer) {
          if (ticket !== asked) { return; }
          if (answer.error) {
            out.textContent = '';
            showError(answer.field, answer.error);
            return;
          }
          showError(null, '');
          var list = document.createElement('ol');
          list.id = 'preview-times';
          // In the zone the viewer picked; "job's zone" is the schedule's own (the field, else
          // the admin's default, as the answer names it).
          var timeZone = window.xjobTime ? window.xjobTime.zoneFor(answer.zone) : null;
          function shown(ms) {
            return timeZone ? window.xjobTime.format(ms, timeZone) : new Date(ms).toLocaleString();
          }
          answer.times.forEach(function (ms, index) {
            var item = document.createElement('li');
            var sent = answer.sent ? answer.sent[index] : ms;
            // With jitter, each fire keeps its time and is sent a little later.
            item.textContent = shown(ms) + (sent !== ms ? ' (sent at ' + shown(sent) + ')' : '');
            // A fire the job's calendar keeps out: struck through, the reason beside it.
            var skipped = answer.skipped ? answer.skipped[index] : '';
            if (skipped) {
              item.className = 'preview-skipped';
              item.textContent = shown(ms) + ' (' + skipped + ')';
            }
            item.title = new Date(ms).toISOString();
            list.appendChild(item);
          });
          var named = timeZone || word('browserZone');
          out.textContent = answer.times.length ? word('nextFires', named) : word('neverFires');
          out.appendChild(list);
          if (answer.overlap) {
            var note = document.createElement('p');
            note.id = 'preview-overlap';
            note.textContent = answer.overlap;
            out.appendChild(note);
          }
        })
        .catch(function () {});
    }
    function later() { clearTimeout(timer); timer = setTimeout(show, 250); }
    [type, conf, zone, jitter, calendar, calendarMode, dstGap, dstOverlap, overlap].forEach(function (el) {
      if (!el) { return; }
      el.addEventListener('input', later);
      el.addEventListener('change', later);
    });
    document.addEventListener('xjob:zone', show);
    show();
  }

  // A new job's editor: the Handler field only matters for BEAN jobs (a script runs its
  // source), so it hides while a script glue type is picked.
  function handlerField() {
    var glue = document.querySelector('#job-form select[name=glue_type]');
    var handler = document.getElementById('handler');
    if (!glue || !handler) { return; }
    var field = handler.closest('.field');
    function sync() { field.hidden = glue.value !== 'BEAN'; }
    glue.addEventListener('change', sync);
    sync();
  }

  // A run's detail: polls ReadRunLog for new lines until the run ended.
  function logTail() {
    var pre = document.getElementById('run-log');
    if (!pre) { return; }
    var id = pre.getAttribute('data-log-id');
    var next = Number(pre.getAttribute('data-next-line')) || 1;
    var status = document.getElementById('run-status');
    var note = document.getElementById('log-note');
    var openAtLoad = status && /RUNNING|PENDING/.test(status.textContent);
    function poll() {
      fetch('/runs/' + id + '/log?from=' + next, { credentials: 'same-origin' })
        .then(function (response) { return response.json(); })
        .then(function (answer) {
          if (answer.error) {
            note.textContent = answer.error;
          } else {
            note.textContent = answer.ended ? '' : word('following');
            if (answer.content) {
              pre.textContent += answer.content;
              pre.scrollTop = pre.scrollHeight;
            }
            next = answer.next_line;
          }
          if (answer.status && status && status.textContent !== answer.status) {
            status.innerHTML = '';
            var badge = document.createElement('span');
            badge.className = 'badge s-' + answer.status.toLowerCase();
            badge.textContent = answer.status;
            status.appendChild(badge);
          }
          var open = answer.status === 'RUNNING' || answer.status === 'PENDING';
          if (openAtLoad && answer.status && !open) {
            // The run ended while watched: its final fields (times, codes) in place, once.
            openAtLoad = false;
            if (window.xjobLive) { window.xjobLive.refresh(); } else { window.location.reload(); return; }
          }
          if (open || !answer.ended) {
            setTimeout(poll, 1000);
          } else {
            pre.setAttribute('data-ended', 'true');
            note.textContent = word('ended');
          }
        })
        .catch(function () { setTimeout(poll, 3000); });
    }
    poll();
  }

  document.addEventListener('DOMContentLoaded', function () {
    localize(document);
    confirmations();
    schedulePreview();
    handlerField();
    logTail();
  });
})();
