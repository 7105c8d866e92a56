const fs = require('fs');
const path = require('path');

// Results go to the sandbox's output directory, the file artifacts.
const outDir = process.env.SANDBOX_OUTPUT || '.';
const input = JSON.parse(fs.readFileSync(0, 'utf8'));
const rows = input.rows || [];
const lines = rows.filter((r) => r.value > 0).map((r) => `${r.name},${r.value}`);
fs.writeFileSync(path.join(outDir, 'report.csv'), lines.join('\n'));
fs.writeFileSync('summary.txt', `${rows.length} rows\n`);
console.log(JSON.stringify({ count: rows.length }));
