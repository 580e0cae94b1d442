"""A tiny web app with one job endpoint, standing in for "your app" in the examples.

POST /jobs/report  {"params": "...", "log_id": N, ...}  ->  200 "report for ... done"
params "fail" answers 500, to see a failed run. Standard library only.
"""

import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/jobs/report":
            self.send_error(404, "no such job endpoint")
            return
        length = int(self.headers.get("content-length", "0"))
        job = json.loads(self.rfile.read(length) or b"{}")
        params = job.get("params", "")
        print(f"run {job.get('log_id')}: report for {params!r}", flush=True)
        if params == "fail":
            self.reply(500, "the report database is down\n")
        else:
            self.reply(200, f"report for {params or 'everyone'} done\n")

    def reply(self, status, text):
        body = text.encode()
        self.send_response(status)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "8000"))
    ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()
