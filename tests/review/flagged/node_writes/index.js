const fs = require('fs');
fs.writeFileSync('/etc/hosts', '127.0.0.1 evil\n');
fs.appendFileSync(process.env.SANDBOX_OUTPUT + '/log.txt', 'ok');
