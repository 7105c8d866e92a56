// The magic number of PNG and a SHA-256 test vector.
const MAGIC = 0x89504e47;
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const PNG_SIGNATURE = '\x89PNG\r\n\x1a\n';
function isPng(buf) {
  return buf.length >= 8 && buf.toString('latin1', 0, 8) === PNG_SIGNATURE;
}
module.exports = { MAGIC, EMPTY_SHA256, isPng };
