// An editor stand-in on the official ACP TypeScript SDK (`@agentclientprotocol/sdk`, pinned in
// package-lock.json), for the acp suites (issue 26 item 3). It spawns `keel acp` as the spec
// on argv[2] says ({program, args, env, cwd, steps}), runs the steps in order, and writes one
// JSON line per thing it saw on stdout, for the Rust test to check against the world:
//
//   {"ev":"update","session":S,"update":{...}}        every session/update, in arrival order
//   {"ev":"permission","request":{...},"answer":ID}   every session/request_permission
//   {"ev":"write","path":P,"content":C}               every fs/write_text_file (recorded, not written)
//   {"ev":"read","path":P}                            every fs/read_text_file
//   {"ev":"result","step":N,"op":OP,"ok":true,"value":V} / {"ok":false,"error":{code,message,data}}
//   {"ev":"exit","code":C}                            keel's exit once stdin closed
//
// Steps: {op:"initialize", fs?:bool}, {op:"new", cwd}, {op:"load", session?, cwd},
// {op:"prompt", text, session?, wait?:false, as?:NAME}, {op:"await", name},
// {op:"until", kind, count?} (wait for the count-th update of that kind), {op:"until_file",
// path} (wait, up to 20 s, for a file a tool creates), {op:"touch", path} (write the updates
// seen so far there, as a signal to the test), {op:"cancel"},
// {op:"list"}, {op:"raw", method, params} (any request), {op:"close"}.
// `permissions` (a list of option ids) answers the permission requests in order.

import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const spec = JSON.parse(process.argv[2]);
const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

const env = { ...process.env };
for (const [k, v] of Object.entries(spec.env ?? {})) {
  if (v === null) delete env[k];
  else env[k] = v;
}
const child = spawn(spec.program, spec.args, {
  cwd: spec.cwd,
  env,
  stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal)));

const updates = [];
const waiters = [];
const permissions = [...(spec.permissions ?? [])];
const fileContents = spec.files ?? {};

function countOf(kind) {
  return updates.filter((u) => u.sessionUpdate === kind).length;
}

function wake() {
  for (let i = waiters.length - 1; i >= 0; i--) {
    const w = waiters[i];
    if (countOf(w.kind) >= w.count) {
      waiters.splice(i, 1);
      w.resolve();
    }
  }
}

const app = acp
  .client({ name: "keel-acp-test-client" })
  .onNotification(acp.methods.client.session.update, async ({ params }) => {
    out({ ev: "update", session: params.sessionId, update: params.update });
    updates.push(params.update);
    wake();
  })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    const answer = permissions.shift() ?? "cancelled";
    out({ ev: "permission", request: params, answer });
    if (answer === "cancelled") return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: answer } };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
    out({ ev: "write", path: params.path, content: params.content });
    fileContents[params.path] = params.content;
    return {};
  })
  .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
    out({ ev: "read", path: params.path });
    if (!(params.path in fileContents)) {
      throw acp.RequestError.resourceNotFound(params.path);
    }
    return { content: fileContents[params.path] };
  });

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

await app.connectWith(stream, async (ctx) => {
  let session = null;
  const pending = {};
  const record = (step, op, promise) =>
    promise.then(
      (value) => {
        out({ ev: "result", step, op, ok: true, value: value ?? null });
        return value;
      },
      (e) => {
        out({ ev: "result", step, op, ok: false, error: { code: e.code, message: e.message, data: e.data } });
        return null;
      },
    );
  for (const [step, s] of spec.steps.entries()) {
    switch (s.op) {
      case "initialize":
        await record(
          step,
          s.op,
          ctx.request(acp.methods.agent.initialize, {
            protocolVersion: acp.PROTOCOL_VERSION,
            clientCapabilities: { fs: { readTextFile: !!s.fs, writeTextFile: !!s.fs } },
          }),
        );
        break;
      case "new": {
        const v = await record(step, s.op, ctx.request(acp.methods.agent.session.new, { cwd: s.cwd, mcpServers: [] }));
        if (v) session = v.sessionId;
        break;
      }
      case "load": {
        const id = s.session ?? session;
        const v = await record(
          step,
          s.op,
          ctx.request(acp.methods.agent.session.load, { sessionId: id, cwd: s.cwd, mcpServers: [] }),
        );
        if (v) session = id;
        break;
      }
      case "prompt": {
        const p = record(
          step,
          s.op,
          ctx.request(acp.methods.agent.session.prompt, {
            sessionId: s.session ?? session,
            prompt: [{ type: "text", text: s.text }],
          }),
        );
        if (s.wait === false) pending[s.as ?? "prompt"] = p;
        else await p;
        break;
      }
      case "await":
        await pending[s.name];
        break;
      case "until":
        await new Promise((resolve) => {
          waiters.push({ kind: s.kind, count: s.count ?? 1, resolve });
          wake();
        });
        break;
      case "until_file": {
        const deadline = Date.now() + 20000;
        while (!existsSync(s.path) && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 20));
        }
        break;
      }
      case "touch":
        writeFileSync(s.path, JSON.stringify(updates));
        break;
      case "cancel":
        await ctx.notify(acp.methods.agent.session.cancel, { sessionId: s.session ?? session });
        out({ ev: "result", step, op: s.op, ok: true, value: null });
        break;
      case "list":
        await record(step, s.op, ctx.request(acp.methods.agent.session.list, {}));
        break;
      case "raw":
        await record(step, s.op, ctx.request(s.method, s.params));
        break;
      case "close":
        break;
      default:
        throw new Error(`unknown step ${JSON.stringify(s)}`);
    }
  }
});
child.stdin.end();
out({ ev: "exit", code: await exited });
