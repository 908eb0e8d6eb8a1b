// A loopback upstream for the peer benches: answers every request 202 with a small JSON
// body, on its own process so its CPU is not the queue's. Prints its port.
import { createServer } from "node:http";
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(202, { "content-type": "application/json" });
    res.end('{"status":"queued"}');
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
