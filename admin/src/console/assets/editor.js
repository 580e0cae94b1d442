// xjob console: the script editor. Each textarea[data-code] becomes a code editor with line
// numbers and syntax highlighting for bash, Python, Node.js, PHP and PowerShell. The textarea
// stays the form's field and stays on top (typing, selection, undo, screen readers and posting
// are the browser's own); the colours are a copy drawn behind its transparent text. Without
// this script the textarea is a plain one. No inline styles or scripts: the console's content
// security policy allows neither.
(function () {
  'use strict';

  function words(text) {
    var set = Object.create(null);
    text.split(' ').forEach(function (word) { set[word] = true; });
    return set;
  }

  // Per language: keywords, line comments, block comment delimiters, extra string quotes,
  // whether keywords ignore case, and what a variable looks like.
  var LANGS = {
    shell: {
      keywords: words('if then else elif fi for while until do done case esac in function ' +
        'select return local export readonly declare typeset set unset shift exit break ' +
        'continue echo printf read source eval exec trap test true false cd'),
      line: ['#'], block: null, quotes: '"\'`', variable: /\$(\{[^}\n]*\}|[A-Za-z_][A-Za-z0-9_]*|[0-9@#?*$!-])/y
    },
    python: {
      keywords: words('False None True and as assert async await break class continue def ' +
        'del elif else except finally for from global if import in is lambda nonlocal not or ' +
        'pass raise return try while with yield print self'),
      line: ['#'], block: null, quotes: '"\'', triple: true, variable: null
    },
    nodejs: {
      keywords: words('async await break case catch class const continue debugger default ' +
        'delete do else export extends false finally for function if import in instanceof ' +
        'let new null of return super switch this throw true try typeof undefined var void ' +
        'while with yield require module console process'),
      line: ['//'], block: ['/*', '*/'], quotes: '"\'`', variable: null
    },
    php: {
      keywords: words('abstract and array as break case catch class clone const continue ' +
        'declare default do echo else elseif empty endfor endforeach endif endwhile extends ' +
        'false final finally fn for foreach function global if implements include ' +
        'include_once instanceof interface isset list match namespace new null or print ' +
        'private protected public readonly require require_once return static switch throw ' +
        'trait true try unset use var while yield php'),
      line: ['//', '#'], block: ['/*', '*/'], quotes: '"\'', variable: /\$[A-Za-z_][A-Za-z0-9_]*/y
    },
    powershell: {
      keywords: words('begin break catch class continue data do dynamicparam else elseif end ' +
        'exit filter finally for foreach from function if in param process return switch ' +
        'throw trap try until using while write-host write-output -eq -ne -gt -ge -lt -le ' +
        '-like -notlike -match -notmatch -and -or -not'),
      ignoreCase: true, line: ['#'], block: ['<#', '#>'], quotes: '"\'',
      variable: /\$[A-Za-z_][A-Za-z0-9_:]*/y
    }
  };

  var NUMBER = /(0x[0-9A-Fa-f]+|[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?)/y;
  var WORD = /-?[A-Za-z_][A-Za-z0-9_-]*/y;

  function matchAt(pattern, text, at) {
    if (!pattern) { return null; }
    pattern.lastIndex = at;
    var found = pattern.exec(text);
    return found ? found[0] : null;
  }

  // The end (exclusive) of a string that opens at `at` with `quote`; backslash escapes, to the
  // end of the text when it is not closed.
  function stringEnd(text, at, quote) {
    var i = at + quote.length;
    while (i < text.length) {
      if (quote.length === 1 && text[i] === '\\') { i += 2; continue; }
      if (text.startsWith(quote, i)) { return i + quote.length; }
      i++;
    }
    return text.length;
  }

  // Splits `text` into [kind, text] tokens; kind is '' for plain text.
  function tokenize(text, lang) {
    var spec = LANGS[lang];
    var out = [];
    var plain = '';
    function push(kind, piece) {
      if (plain) { out.push(['', plain]); plain = ''; }
      out.push([kind, piece]);
    }
    var i = 0;
    while (i < text.length) {
      var c = text[i];
      var before = i === 0 ? '\n' : text[i - 1];
      var end = -1;
      if (spec.block && text.startsWith(spec.block[0], i)) {
        end = text.indexOf(spec.block[1], i + spec.block[0].length);
        end = end < 0 ? text.length : end + spec.block[1].length;
        push('com', text.slice(i, end)); i = end; continue;
      }
      // A '#' starts a shell comment only at the start of a word (not in $# or ${#a}).
      var lineComment = spec.line.some(function (mark) {
        return text.startsWith(mark, i) && (mark !== '#' || /\s/.test(before) || lang !== 'shell');
      });
      if (lineComment) {
        end = text.indexOf('\n', i);
        end = end < 0 ? text.length : end;
        push('com', text.slice(i, end)); i = end; continue;
      }
      if (spec.triple && (text.startsWith('"""', i) || text.startsWith("'''", i))) {
        end = stringEnd(text, i, text.slice(i, i + 3));
        push('str', text.slice(i, end)); i = end; continue;
      }
      if (spec.quotes.indexOf(c) >= 0) {
        end = stringEnd(text, i, c);
        push('str', text.slice(i, end)); i = end; continue;
      }
      var found = matchAt(spec.variable, text, i);
      if (found) { push('var', found); i += found.length; continue; }
      if (!/[A-Za-z0-9_]/.test(before)) {
        found = matchAt(NUMBER, text, i);
        if (found) { push('num', found); i += found.length; continue; }
        found = matchAt(WORD, text, i);
        if (found) {
          var key = spec.ignoreCase ? found.toLowerCase() : found;
          if (spec.keywords[key]) { push('kw', found); } else { plain += found; }
          i += found.length; continue;
        }
      }
      plain += c;
      i++;
    }
    if (plain) { out.push(['', plain]); }
    return out;
  }

  // The editor's language: its own data-code, else the form's glue type (the new-job form).
  function languageOf(area) {
    var fixed = area.getAttribute('data-code');
    if (fixed && LANGS[fixed]) { return fixed; }
    var type = area.form && area.form.querySelector('[name=glue_type]');
    var name = type ? type.value.toLowerCase() : '';
    return LANGS[name] ? name : null;
  }

  function paint(code, text, lang) {
    while (code.firstChild) { code.removeChild(code.firstChild); }
    var tokens = lang ? tokenize(text, lang) : [['', text]];
    tokens.forEach(function (token) {
      if (!token[0]) { code.appendChild(document.createTextNode(token[1])); return; }
      var span = document.createElement('span');
      span.className = 'tok-' + token[0];
      span.textContent = token[1];
      code.appendChild(span);
    });
    // A trailing newline needs a character after it to take up its line.
    code.appendChild(document.createTextNode('\n '));
  }

  function number(gutter, text) {
    var lines = text.split('\n').length;
    var numbers = [];
    for (var n = 1; n <= lines; n++) { numbers.push(n); }
    gutter.textContent = numbers.join('\n') + '\n ';
  }

  function enhance(area) {
    var box = document.createElement('div');
    box.className = 'code-editor';
    var gutter = document.createElement('pre');
    gutter.className = 'code-gutter';
    gutter.setAttribute('aria-hidden', 'true');
    var layer = document.createElement('div');
    layer.className = 'code-layer';
    var shown = document.createElement('pre');
    shown.className = 'code-shown';
    shown.setAttribute('aria-hidden', 'true');
    var code = document.createElement('code');
    shown.appendChild(code);
    area.parentNode.insertBefore(box, area);
    layer.appendChild(shown);
    layer.appendChild(area);
    box.appendChild(gutter);
    box.appendChild(layer);
    area.setAttribute('wrap', 'off');
    area.classList.add('code-input');
    var lines = 0;
    function update() {
      var lang = languageOf(area);
      box.setAttribute('data-lang', lang || 'text');
      paint(code, area.value, lang);
      var count = area.value.split('\n').length;
      if (count !== lines) { lines = count; number(gutter, area.value); }
      sync();
    }
    function sync() {
      shown.scrollTop = area.scrollTop;
      shown.scrollLeft = area.scrollLeft;
      gutter.scrollTop = area.scrollTop;
    }
    area.addEventListener('input', update);
    area.addEventListener('scroll', sync);
    var type = area.form && area.form.querySelector('[name=glue_type]');
    if (type) { type.addEventListener('change', update); }
    update();
  }

  function start() {
    document.querySelectorAll('textarea[data-code]').forEach(enhance);
  }
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
}());
