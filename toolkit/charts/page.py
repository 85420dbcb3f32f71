"""The pages' look: one stylesheet and one Content-Security-Policy for every self-contained HTML page
(the report, the what-if, the history and the compare pages).

``CSP`` (``default-src 'none'``) makes the browser refuse any fetch or script even if one slipped in;
``CSS`` uses the system font stack (no web font to fetch).
"""

CSS = """
:root{--ink:#212529;--muted:#6c757d;--line:#dee2e6;--bg:#f8f9fa;--bad:#c92a2a;--good:#2b8a3e;--warn:#e67700}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
 font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:920px;margin:0 auto;padding:24px 16px 48px}
header.top{display:flex;justify-content:space-between;gap:16px;color:var(--muted);font-size:13px;
 border-bottom:1px solid var(--line);padding-bottom:8px;margin-bottom:20px}
header.top b{color:var(--ink);letter-spacing:.02em}
.verdict{background:#fff;border:1px solid var(--line);border-left:6px solid var(--good);border-radius:6px;
 padding:18px 22px;margin-bottom:18px}
.verdict.bad{border-left-color:var(--bad)}
.badge{display:inline-block;font-size:12px;font-weight:700;letter-spacing:.06em;text-transform:uppercase;
 color:#fff;background:var(--good);border-radius:3px;padding:2px 8px}
.bad .badge{background:var(--bad)}
.verdict.na{border-left-color:var(--muted)}
.na .badge{background:var(--muted)}
.verdict h1{font-size:25px;line-height:1.3;margin:10px 0 14px;font-weight:650}
.kpis{display:grid;grid-template-columns:repeat(4,1fr);gap:10px;margin:6px 0 4px}
.kpi{background:var(--bg);border-radius:5px;padding:8px 12px}
.kpi .k{font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
.kpi .v{font-size:20px;font-weight:650;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.kpi .s{font-size:12px;color:var(--muted)}
.stages{margin:10px 0 0}.stages table{font-size:13px}
.more{margin:12px 0 0;padding-left:18px;color:#343a40;font-size:14px}
.status{margin:10px 0 0;color:#343a40;font-size:14px}
.caveats{background:#fff9db;border:1px solid #ffe066;border-radius:6px;padding:10px 16px;margin-bottom:18px;
 font-size:14px}
.caveats ul{margin:4px 0 0;padding-left:18px}
section{background:#fff;border:1px solid var(--line);border-radius:6px;padding:16px 20px;margin-bottom:18px}
h2{font-size:18px;margin:0 0 4px}
h3{font-size:15px;margin:16px 0 6px}
p.cap{margin:0 0 10px;color:var(--muted);font-size:13px}
figure{margin:0;overflow-x:auto}
.tw{overflow-x:auto}
figure svg{max-width:100%;height:auto;display:block}
.nochart{color:var(--muted);font-style:italic}
table{border-collapse:collapse;width:100%;font-size:13px;font-variant-numeric:tabular-nums}
th,td{text-align:left;padding:5px 7px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:#495057;background:var(--bg)}
td.n,th.n{text-align:right;white-space:nowrap}
td.nw{white-space:nowrap}
tr.reg td{background:#fff5f5}
.yes{color:var(--bad);font-weight:700}
.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;vertical-align:-1px}
.small{font-size:12px;color:var(--muted)}
details{margin:6px 0;border:1px solid var(--line);border-radius:5px;padding:4px 10px}
summary{cursor:pointer;font-weight:600;font-size:14px;padding:4px 0}
dl.meta{display:grid;grid-template-columns:180px 1fr;gap:4px 12px;font-size:13px;margin:0}
dl.meta dt{color:var(--muted)}
dl.meta dd{margin:0;word-break:break-word}
.mixed{color:var(--bad)}
footer{color:var(--muted);font-size:12px;text-align:center}
@media (max-width:760px){.kpis{grid-template-columns:repeat(2,1fr)}.verdict h1{font-size:20px}
 main{padding:12px 8px 32px}section{padding:12px 10px}.verdict{padding:14px 14px}
 header.top{flex-wrap:wrap}dl.meta{grid-template-columns:1fr}}
@media print{body{background:#fff}section,.verdict{break-inside:avoid}}
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
