// Runs an ONNX file with onnxruntime-node outside jest's sandbox (whose typed arrays
// onnxruntime's checks do not recognise): reads {file, inputs: {name: {shape, data}}} as JSON on
// stdin and prints {name: {shape, data}} of every output.
import * as ort from 'onnxruntime-node';

let text = '';
for await (const chunk of process.stdin) text += chunk;
const { file, inputs } = JSON.parse(text);
const session = await ort.InferenceSession.create(file);
const feeds = {};
for (const [name, t] of Object.entries(inputs)) feeds[name] = new ort.Tensor('float32', Float32Array.from(t.data), t.shape);
const out = await session.run(feeds);
const result = {};
for (const [name, t] of Object.entries(out)) result[name] = { shape: t.dims, data: Array.from(t.data) };
await session.release();
process.stdout.write(JSON.stringify(result));
