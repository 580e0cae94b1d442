'use strict';
// Script (GLUE) jobs: the job carries its script, the executor runs it with an interpreter, as
// the Rust SDK does (docs/executors.md, "Script (GLUE) jobs"):
//
//   RunRequest{glueType, glueSource, glueUpdatedMs}
//     ─▶ {logDir}/gluesource/{jobId}_{glueUpdatedMs}.{ext}   (written once per version)
//     ─▶ command handler: [interpreter, leading args…, script, params split on whitespace]
//
// Off unless the executor enables a language: scripts are code sent over the network.
const fs = require('node:fs');
const path = require('node:path');
const { commandHandler } = require('./command');
const { JobError } = require('./context');

const SCRIPT_DIR = 'gluesource';

const GROOVY_UNSUPPORTED = 'GLUE_TYPE_GROOVY is not supported: it is Java source compiled inside '
  + "XXL-JOB's JVM executor, and xjob executors are not JVMs; use a BEAN handler or a script glue "
  + 'type (shell, python, nodejs, php, powershell)';

// glue type -> default interpreter, file extension, arguments before the script path
const LANGUAGES = {
  GLUE_TYPE_SHELL: { interpreter: 'bash', extension: 'sh', leading: [] },
  GLUE_TYPE_PYTHON: { interpreter: 'python3', extension: 'py', leading: [] },
  GLUE_TYPE_NODEJS: { interpreter: 'node', extension: 'js', leading: [] },
  GLUE_TYPE_PHP: { interpreter: 'php', extension: 'php', leading: [] },
  GLUE_TYPE_POWERSHELL: { interpreter: 'pwsh', extension: 'ps1', leading: ['-NoLogo', '-NoProfile', '-NonInteractive', '-File'] },
};

// `shell`, `SHELL` or `GLUE_TYPE_SHELL` -> `GLUE_TYPE_SHELL`; throws for anything else.
function glueTypeName(glueType) {
  const upper = String(glueType).toUpperCase();
  const name = upper.startsWith('GLUE_TYPE_') ? upper : `GLUE_TYPE_${upper}`;
  if (!LANGUAGES[name]) throw new Error(`${glueType} is not a script glue type`);
  return name;
}

// The script of the run's job and version, written if this version is not stored yet (and then
// the job's older versions deleted).
function scriptFile(language, scriptDir, request) {
  const prefix = `${request.jobId}_`;
  const name = `${prefix}${request.glueUpdatedMs}.${language.extension}`;
  const file = path.join(scriptDir, name);
  if (fs.existsSync(file)) return file;
  try {
    fs.mkdirSync(scriptDir, { recursive: true });
    // Written aside then renamed: a half-written file is never taken for this version.
    const partial = path.join(scriptDir, `${name}.${request.logId}.partial`);
    fs.writeFileSync(partial, request.glueSource);
    fs.renameSync(partial, file);
  } catch (error) {
    throw new JobError(`failed to write the glue script ${file}: ${error.message}`);
  }
  for (const other of fs.readdirSync(scriptDir)) {
    if (other.startsWith(prefix) && other !== name) {
      try { fs.unlinkSync(path.join(scriptDir, other)); } catch { /* only costs disk space */ }
    }
  }
  return file;
}

function glueHandler(glueType, interpreter, env, logDir) {
  const language = LANGUAGES[glueType];
  const scriptDir = path.join(logDir, SCRIPT_DIR);
  return async (ctx) => {
    const script = scriptFile(language, scriptDir, ctx.request);
    ctx.log(`glue ${glueType} version ${ctx.request.glueUpdatedMs} from ${script}`);
    return commandHandler([interpreter || language.interpreter, ...language.leading, script], { env })(ctx);
  };
}

// enabled: Map glue type name -> interpreter (undefined: the usual one).
function glueRunners(enabled, env, logDir) {
  const runners = new Map();
  for (const [glueType, interpreter] of enabled) runners.set(glueType, glueHandler(glueType, interpreter, env, logDir));
  return runners;
}

module.exports = { GROOVY_UNSUPPORTED, LANGUAGES, glueRunners, glueTypeName };
