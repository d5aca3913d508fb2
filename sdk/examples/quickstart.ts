import { connectFromHome } from "@snowpea/sdk";

const client = await connectFromHome({ clientVersion: "1.0.0" }); // reads $SNOWPEA_HOME/daemon.json
const { sessionId } = await client.createSession({ workdir: process.cwd(), mode: "accept" });
client.on("session.event", (e) => {
  if (e.kind === "message.delta") process.stdout.write(e.payload.text);
});
client.onApprovalRequest((req) => ({ decision: req.tool === "shell" ? "deny" : "allow", scope: "once" }));
const turn = await client.promptAndWait(sessionId, "what does this repo do?");
console.log(`\n[turn ${turn.reason}]`);
await client.close();
