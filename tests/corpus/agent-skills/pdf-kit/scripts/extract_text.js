'use strict';
/**
 * @fileoverview Extract the text of every page of a PDF, one page per
 * paragraph.
 * @param {string} file
 */
console.log(process.argv.slice(2));
