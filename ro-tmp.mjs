process.env.SQLITE_USE_URI = '1';
const { default: Database } = await import('better-sqlite3');
import { readdirSync } from 'node:fs';
const [,, mode, f] = process.argv;
let db;
try {
 if (mode === 'imm') { db = new Database(`file:${f}?immutable=1`, { readonly: true, fileMustExist: true }); console.log(db.prepare('select count(*) n from t').get(), db.pragma('journal_mode')); db.close(); }
 if (mode === 'rw') { db = new Database(f); console.log(db.prepare('select count(*) n from t').get()); db.close(); }
} catch (e) { console.log('ERR', e.code, e.message); }
console.log('after', readdirSync(f.replace(/\/[^/]*$/, '')));
