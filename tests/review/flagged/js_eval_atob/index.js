const payload = "Y29uc29sZS5sb2coMSk=";
eval(atob(payload));
eval(Buffer.from(payload, 'base64').toString());
const run = new Function(atob(payload));
run();
