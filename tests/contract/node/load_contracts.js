// Load the API contracts in their own ecosystems' tools and print what they found, as JSON.
//
//   node load_contracts.js asyncapi <asyncapi.yaml>   @asyncapi/parser (what AsyncAPI Studio,
//                                                     the generator and the CLI use)
//   node load_contracts.js openapi <openapi.yaml>     @apidevtools/swagger-parser's validate
//
// Run by tests/contract/test_ecosystem_tools.py, which checks the answer. CommonJS, so that it
// runs on Debian's Node.js 18 as on later ones.
"use strict";

async function asyncapi(path) {
  const { Parser, fromFile, DiagnosticSeverity } = require("@asyncapi/parser");
  const { document, diagnostics } = await fromFile(new Parser(), path).parse();
  const answer = {
    parsed: document !== undefined,
    diagnostics: diagnostics.map((d) => ({
      severity: DiagnosticSeverity[d.severity],
      code: String(d.code),
      message: d.message,
      path: d.path.join("/"),
    })),
  };
  if (document !== undefined) {
    answer.version = document.version();
    answer.channels = document.channels().all().map((c) => c.address()).sort();
    answer.operations = document.operations().all().map((o) => `${o.action()} ${o.id()}`).sort();
    answer.messages = document.allMessages().all().map((m) => m.name()).sort();
  }
  return answer;
}

async function openapi(path) {
  const SwaggerParser = require("@apidevtools/swagger-parser");
  try {
    const api = await SwaggerParser.validate(path);
    const operations = [];
    for (const [route, item] of Object.entries(api.paths)) {
      for (const method of ["get", "put", "post", "delete", "patch", "head", "options", "trace"]) {
        if (item[method] !== undefined) operations.push(`${method.toUpperCase()} ${route}`);
      }
    }
    return { valid: true, version: api.openapi, paths: Object.keys(api.paths).length, operations };
  } catch (error) {
    return { valid: false, error: String(error.message) };
  }
}

const [kind, path] = process.argv.slice(2);
const load = { asyncapi, openapi }[kind];
if (load === undefined || path === undefined) {
  console.error("usage: node load_contracts.js asyncapi|openapi <file>");
  process.exit(2);
}
load(path).then(
  (answer) => console.log(JSON.stringify(answer)),
  (error) => {
    console.error(error && error.stack ? error.stack : String(error));
    process.exit(1);
  },
);
