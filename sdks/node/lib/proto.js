'use strict';
// The xjob.v1 contract, loaded at run time with @grpc/proto-loader from this package's own
// proto/ folder (a copy of the repository's proto files, kept equal by scripts/sdk-protos.sh
// and shipped in the npm tarball): nothing is generated, and nothing outside the package is read.
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTOCOL_VERSION = 1;
const PROTO_DIR = path.resolve(__dirname, '..', 'proto');

function load() {
  const definition = protoLoader.loadSync(
    ['xjob/v1/common.proto', 'xjob/v1/registry.proto', 'xjob/v1/executor.proto'],
    {
      includeDirs: [PROTO_DIR],
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

module.exports = { xjob, PROTOCOL_VERSION, PROTO_DIR };
