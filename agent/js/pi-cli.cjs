"use strict";
// `node pi-cli.cjs ARGS…` runs the `pi` binary that started the extension process
// ($PI_EXECUTABLE) with ARGS, with this process's stdio. The sidecar names this file as its
// `process.argv[1]`, where Pi's own process has its cli.js, so extensions that start Pi
// again the way Pi's subagent example does (`process.execPath` + `process.argv[1]`) start
// this binary.
const { spawn } = require("node:child_process");

const child = spawn(process.env.PI_EXECUTABLE || "pi", process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (error) => {
  process.stderr.write(`Could not start pi: ${error.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 + 15 : 1)));
