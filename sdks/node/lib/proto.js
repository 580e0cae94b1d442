'use strict';
// The xjob.v1 contract, loaded at run time from the repository's proto/ (or $XJOB_PROTO_DIR)
// with @grpc/proto-loader: nothing is generated or checked in.
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTOCOL_VERSION = 1;

function protoDir() {
  return process.env.XJOB_PROTO_DIR || path.resolve(__dirname, '..', '..', '..', 'proto');
}

function load() {
  const root = protoDir();
  const definition = protoLoader.loadSync(
    ['xjob/v1/common.proto', 'xjob/v1/registry.proto', 'xjob/v1/executor.proto'],
    {
      includeDirs: [root],
      // Field names become camelCase (logId); int64 become JS numbers (log ids stay far below
      // 2^53); enums are their names (BLOCK_STRATEGY_COVER_EARLY); unset fields get defaults.
      keepCase: false,
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true,
    },
  );
  return grpc.loadPackageDefinition(definition).xjob.v1;
}

const xjob = load();

module.exports = { xjob, PROTOCOL_VERSION, protoDir };
