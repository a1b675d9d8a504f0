#!/usr/bin/env node
// A Node.js client of ALE's gRPC contract (ale.v1). It loads the very .proto files the Python
// packages are generated from, so it stays in step with the contract by construction.
//
//   node client.js --target 127.0.0.1:50051 --api-key KEY sandbox create
//   node client.js --target ... sandbox exec SANDBOX_ID [--max-output-bytes N] [--timeout-ms N] -- echo hello
//   node client.js --target ... sandbox ls
//   node client.js --target ... sandbox rm SANDBOX_ID
//   node client.js --target ... env make game:GuessTheNumber-v0 [--kwargs JSON] [--seed 1] [--step ACTION ...]
//
// Output is one JSON object per command on stdout; errors go to stderr with the server's typed
// ErrorDetail (code, field, message) and a non-zero exit code.
//
// --max-receive-bytes N (default 16 MiB, the Admin's send limit): grpc-js refuses responses over
// 4 MiB by default, so an exec with max_output_bytes above ~4 MiB, or a 4 MiB ReadFile, would fail
// client-side with RESOURCE_EXHAUSTED and the output lost. See docs/clients.md.
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const PROTO_ROOT = process.env.ALE_PROTO_ROOT || path.resolve(__dirname, '../../packages/ale-proto/proto');
const FILES = ['sandbox', 'env', 'common'].map((n) => `ale_proto/v1/${n}.proto`);
const MiB = 1024 * 1024;
// The Admin sends and accepts messages up to 16 MiB; receive as much.
const DEFAULT_MAX_RECEIVE = 16 * MiB;
// Exec: the client deadline outlasts the command's timeout_ms by the Rocklet's SIGTERM->SIGKILL
// grace (2 s) plus collection and relay; 10 s leaves room on a loaded machine (docs/clients.md).
const EXEC_DEADLINE_SLACK_MS = 10000;

function load() {
  const def = protoLoader.loadSync(FILES, {
    includeDirs: [PROTO_ROOT],
    keepCase: true, // field names exactly as in the .proto files
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(def).ale.v1;
}

function parseArgs(argv) {
  const opts = {
    target: process.env.ALE_ROCK_ADDRESS || '127.0.0.1:50051',
    apiKey: process.env.ALE_ROCK_API_KEY || '',
    timeoutMs: 60000,
    maxReceiveBytes: DEFAULT_MAX_RECEIVE,
    maxOutputBytes: 0,
    execTimeoutMs: 30000,
  };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--target') opts.target = argv[++i];
    else if (a === '--api-key') opts.apiKey = argv[++i];
    else if (a === '--timeout-ms') opts.timeoutMs = Number(argv[++i]);
    else if (a === '--max-receive-bytes') opts.maxReceiveBytes = Number(argv[++i]);
    else if (a === '--max-output-bytes') opts.maxOutputBytes = Number(argv[++i]);
    else if (a === '--exec-timeout-ms') opts.execTimeoutMs = Number(argv[++i]);
    else if (a === '--') { rest.push(...argv.slice(i + 1)); break; } else rest.push(a);
  }
  return { opts, rest };
}

// Typed errors travel as a serialized ale.v1.ErrorDetail in the trailing metadata "ale-error-bin".
let errorDetailType;
function errorDetail(err) {
  const raw = err.metadata && err.metadata.get('ale-error-bin');
  if (raw && raw.length) {
    if (!errorDetailType) {
      const root = new protobuf.Root();
      root.resolvePath = (_origin, target) =>
        target.startsWith('google/protobuf/') ? target : path.join(PROTO_ROOT, target);
      root.loadSync('ale_proto/v1/common.proto', { keepCase: true });
      errorDetailType = root.lookupType('ale.v1.ErrorDetail');
    }
    const msg = errorDetailType.toObject(errorDetailType.decode(raw[0]), { enums: String });
    return { code: msg.code, field: msg.field || '', message: msg.message || '' };
  }
  return { code: grpc.status[err.code] || String(err.code), field: '', message: err.details || String(err) };
}

function call(client, method, request, opts, timeoutMs = opts.timeoutMs) {
  const md = new grpc.Metadata();
  if (opts.apiKey) md.set('authorization', `Bearer ${opts.apiKey}`);
  const deadline = new Date(Date.now() + timeoutMs);
  return new Promise((resolve, reject) => {
    client[method](request, md, { deadline }, (err, resp) => (err ? reject(err) : resolve(resp)));
  });
}

function channelOptions(opts) {
  return { 'grpc.max_receive_message_length': opts.maxReceiveBytes, 'grpc.max_send_message_length': DEFAULT_MAX_RECEIVE };
}

async function sandboxCommand(v1, opts, args) {
  const client = new v1.SandboxService(opts.target, grpc.credentials.createInsecure(), channelOptions(opts));
  const [sub, ...rest] = args;
  switch (sub) {
    case 'create': {
      const r = await call(client, 'CreateSandbox', { spec: {}, wait: true }, opts);
      return { id: r.sandbox.id, state: r.sandbox.state };
    }
    case 'ls': {
      const r = await call(client, 'ListSandboxes', {}, opts);
      return { sandboxes: r.sandboxes.map((s) => ({ id: s.id, state: s.state })) };
    }
    case 'exec': {
      const [id, ...argv] = rest;
      const spec = { argv, timeout_ms: opts.execTimeoutMs, max_output_bytes: opts.maxOutputBytes };
      const r = await call(client, 'Exec', { sandbox_id: id, spec }, opts, opts.execTimeoutMs + EXEC_DEADLINE_SLACK_MS);
      const res = r.result;
      return { exit_code: res.exit_code, end_reason: res.end_reason, stdout: Buffer.from(res.stdout).toString(), stderr: Buffer.from(res.stderr).toString(), stdout_truncated: res.stdout_truncated };
    }
    case 'rm': {
      await call(client, 'DeleteSandbox', { sandbox_id: rest[0] }, opts);
      return { deleted: rest[0] };
    }
    default:
      throw new Error(`unknown sandbox command: ${sub} (create|ls|exec|rm)`);
  }
}

// google.protobuf.Struct (MakeRequest.kwargs, MakeResponse.tools, ResetResponse/StepResponse.info)
// reaches grpc-js as {fields: {k: {kind: 'numberValue', numberValue: 5}}} (proto-loader with
// oneofs: true). These two functions convert between that and plain JSON values.
function toValue(v) {
  if (v === null || v === undefined) return { nullValue: 'NULL_VALUE' };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  return { structValue: toStruct(v) };
}

function toStruct(obj) {
  return { fields: Object.fromEntries(Object.entries(obj || {}).map(([k, v]) => [k, toValue(v)])) };
}

function fromValue(v) {
  switch (v && v.kind) {
    case 'numberValue': return v.numberValue;
    case 'stringValue': return v.stringValue;
    case 'boolValue': return v.boolValue;
    case 'listValue': return (v.listValue.values || []).map(fromValue);
    case 'structValue': return fromStruct(v.structValue);
    default: return null; // nullValue, or unset
  }
}

function fromStruct(s) {
  return Object.fromEntries(Object.entries((s && s.fields) || {}).map(([k, v]) => [k, fromValue(v)]));
}

async function envCommand(v1, opts, args) {
  const client = new v1.EnvService(opts.target, grpc.credentials.createInsecure(), channelOptions(opts));
  const [sub, envId, ...rest] = args;
  if (sub !== 'make') throw new Error(`unknown env command: ${sub} (make)`);
  let seed;
  let kwargs = {};
  const actions = [];
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === '--seed') seed = Number(rest[++i]);
    else if (rest[i] === '--kwargs') kwargs = JSON.parse(rest[++i]);
    else if (rest[i] === '--step') actions.push(rest[++i]);
  }
  const made = await call(client, 'Make', { env_id: envId, kwargs: toStruct(kwargs) }, opts);
  const handle = made.env_handle;
  const out = { env_handle: handle, tools: (made.tools || []).map(fromStruct), steps: [] };
  try {
    const reset = await call(client, 'Reset', seed === undefined ? { env_handle: handle } : { env_handle: handle, seed }, opts);
    out.observation = reset.observation;
    out.info = fromStruct(reset.info);
    for (const action of actions) {
      const s = await call(client, 'Step', { env_handle: handle, action }, opts);
      out.steps.push({ observation: s.observation, reward: s.reward, terminated: s.terminated, truncated: s.truncated, info: fromStruct(s.info) });
      if (s.terminated || s.truncated) break;
    }
  } finally {
    await call(client, 'Close', { env_handle: handle }, opts);
  }
  return out;
}

async function main() {
  const { opts, rest } = parseArgs(process.argv.slice(2));
  const v1 = load();
  const [group, ...args] = rest;
  let result;
  if (group === 'sandbox') result = await sandboxCommand(v1, opts, args);
  else if (group === 'env') result = await envCommand(v1, opts, args);
  else throw new Error('usage: client.js [--target H:P] [--api-key K] sandbox|env ...');
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((err) => {
  const detail = err.code !== undefined && err.metadata ? errorDetail(err) : { code: 'CLIENT', field: '', message: err.message };
  process.stderr.write(JSON.stringify({ error: detail }) + '\n');
  process.exit(2);
});
