// Shared by the node tests: starts `waste serve` on a free loopback port
// (and stops it again), prints checks, and makes test images.
import { spawn } from "node:child_process";

export async function startServer(waste, container, extraArgs = []) {
  const child = spawn(waste, ["serve", container, "--host", "127.0.0.1", "--port", "0",
                              "--model-id", "tiny", ...extraArgs],
                      { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", d => { stderr += d; });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error("server did not start: " + stderr)), 30000);
    child.stdout.on("data", d => {
      out += d;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.on("exit", code => { clearTimeout(timer); reject(new Error(`server exited ${code}: ${stderr}`)); });
  });
  return {
    url,
    // SIGINT, then the exit code (SIGKILL after 5 s: null).
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      const done = new Promise(r => child.on("exit", code => r(code)));
      child.kill("SIGINT");
      const t = setTimeout(() => child.kill("SIGKILL"), 5000);
      const code = await done;
      clearTimeout(t);
      return code;
    },
  };
}

export function check(cond, what) {
  if (!cond) throw new Error("FAILED: " + what);
  console.log("ok - " + what);
}

// A w x h 24-bit BMP (a gradient), as a Buffer.
export function bmp(w, h) {
  const stride = Math.ceil(w * 3 / 4) * 4;
  const b = Buffer.alloc(54 + stride * h);
  b.write("BM", 0);
  b.writeUInt32LE(b.length, 2); b.writeUInt32LE(54, 10); b.writeUInt32LE(40, 14);
  b.writeInt32LE(w, 18); b.writeInt32LE(h, 22); b.writeUInt16LE(1, 26); b.writeUInt16LE(24, 28);
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
    const at = 54 + y * stride + x * 3;
    b[at] = x * 4; b[at + 1] = y * 5; b[at + 2] = (x * y) & 255;
  }
  return b;
}
