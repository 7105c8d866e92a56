const http = require('http');
const axios = require('axios');

async function main() {
  const res = await fetch('https://example.com/api');
  http.get('http://example.com', () => {});
  const { data } = await axios.get('https://example.com');
  console.log(res.status, data);
}
main();
