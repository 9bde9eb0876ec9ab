"use strict";
// Shared by the node's and the cluster's status pages (inlined where a page says SCRIPT).
// The admin token: from the address's #token=… (a fragment, never sent or logged), or typed
// into the box shown after a 401; kept for the tab's session.
let token = sessionStorage.getItem("ecdn-admin-token") || "";
const tokenInHash = location.hash.match(/token=([^&]+)/);
if (tokenInHash) {
  token = decodeURIComponent(tokenInHash[1]);
  sessionStorage.setItem("ecdn-admin-token", token);
}
const int = (v) => v == null ? "–" : Math.round(v).toLocaleString("en-US");
function bytes(v) {
  if (v == null) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + " " + u[i];
}
const get = (o, p) => p.split(".").reduce((x, k) => (x == null ? undefined : x[k]), o);
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
// Asks for url() once a second and hands the data to render; says how that went in #state.
function start(url, render) {
  async function poll() {
    const st = document.getElementById("state");
    try {
      const r = await fetch(url(), { headers: token ? { Authorization: "Bearer " + token } : {}, cache: "no-store" });
      if (r.status === 401) {
        document.getElementById("login").style.display = "block";
        st.textContent = "needs the admin token";
        st.className = "bad";
        return;
      }
      if (!r.ok) throw new Error("status.json answered " + r.status);
      const d = await r.json();
      render(d);
      document.getElementById("login").style.display = "none";
      st.textContent = "updated " + new Date(d.now_ms).toLocaleTimeString("en-GB");
      st.className = "";
    } catch (e) {
      st.textContent = "no answer: " + e.message;
      st.className = "bad";
    }
  }
  document.getElementById("loginform").addEventListener("submit", (e) => {
    e.preventDefault();
    token = document.getElementById("token").value;
    sessionStorage.setItem("ecdn-admin-token", token);
    poll();
  });
  poll();
  setInterval(poll, 1000);
}
