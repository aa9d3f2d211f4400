// Generic driver: connect, then run the config's steps in order through the validating client
// paths (`Client.callTool` checks structuredContent against the tool's outputSchema with Ajv,
// even when isError is true), and print every step's outcome. A step that throws is recorded
// as {threw: {code, message}} and the run goes on, so pytest sees every failure at once.
//
// config: {target, roots?, clientInfo?, sdk?: "v1" | "v2", mode?: "auto" | "legacy", steps: [{op, ...}]}
// ops: listTools | call {name, arguments} | setRoots {roots} | listPrompts | getPrompt {name, arguments}
//      | listResources {cursor?} | listResourceTemplates | readResource {uri}
//      | callUntil {name, arguments, path, equals, timeoutMs}: repeat the call until the value at
//        `path` (dotted, e.g. "structuredContent.scopes.0") equals `equals`; the last result wins
//      | validate {tool, instance}: the tool's outputSchema (as listed) checked by the SDK's own
//        Ajv validator against a given instance
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { emit, errorData, readConfig, withSession } from "./lib.mjs";

const config = readConfig();

async function runStep(session, step, listed) {
  const { client } = session;
  switch (step.op) {
    case "listTools": {
      const result = await client.listTools();
      for (const tool of result.tools) listed.set(tool.name, tool);
      return result;
    }
    case "call":
      return await client.callTool({ name: step.name, arguments: step.arguments ?? {} });
    case "callUntil": {
      const deadline = Date.now() + (step.timeoutMs ?? 5000);
      for (;;) {
        const result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} });
        const value = step.path.split(".").reduce((node, key) => (node == null ? node : node[key]), result);
        if (JSON.stringify(value) === JSON.stringify(step.equals) || Date.now() > deadline) return result;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    case "setRoots":
      await session.setRoots(step.roots);
      return { rootsRequests: session.state.rootsRequests };
    case "listPrompts":
      return await client.listPrompts();
    case "getPrompt":
      return await client.getPrompt({ name: step.name, arguments: step.arguments ?? {} });
    case "listResources":
      return await client.listResources(step.cursor ? { cursor: step.cursor } : undefined);
    case "listResourceTemplates":
      return await client.listResourceTemplates();
    case "readResource":
      return await client.readResource({ uri: step.uri });
    case "validate": {
      const tool = listed.get(step.tool);
      if (!tool) throw new Error(`tool ${step.tool} was not listed`);
      const check = new AjvJsonSchemaValidator().getValidator(tool.outputSchema);
      const verdict = check(step.instance);
      return { valid: verdict.valid, errorMessage: verdict.errorMessage ?? null };
    }
    default:
      throw new Error(`unknown op ${step.op}`);
  }
}

const out = await withSession(
  config.target,
  { roots: config.roots, clientInfo: config.clientInfo, sdk: config.sdk, mode: config.mode },
  async (session) => {
    const { client } = session;
    const listed = new Map();
    const steps = [];
    for (const step of config.steps ?? []) {
      try {
        steps.push({ op: step.op, result: await runStep(session, step, listed) });
      } catch (err) {
        steps.push({ op: step.op, threw: errorData(err) });
      }
    }
    return {
      protocolVersion: client.getNegotiatedProtocolVersion?.() ?? session.state.protocolVersion ?? null,
      connectMs: session.state.connectMs,
      serverVersion: client.getServerVersion() ?? null,
      capabilities: client.getServerCapabilities() ?? null,
      instructions: client.getInstructions() ?? null,
      rootsRequests: session.state.rootsRequests,
      steps,
    };
  },
);
emit(out);
