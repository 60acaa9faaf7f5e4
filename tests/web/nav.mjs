// tests/web/nav.mjs: navigation that survives Chromium's
// net::ERR_NETWORK_CHANGED. Chromium aborts a navigation in flight when
// the host's network interfaces or addresses change, and the suite's
// other tests make and remove veth pairs and namespaces on this host all
// the time (tests/run.sh runs several at once): seen in full runs, never
// alone. Such a navigation is tried again (5 tries at most, each said);
// any other error is thrown at once.
export async function gotoRetrying(page, url, options) {
  for (let i = 1; ; i++) {
    try {
      return await page.goto(url, options);
    } catch (e) {
      if (i >= 5 || !String(e && e.message).includes('ERR_NETWORK_CHANGED')) throw e;
      console.log('retry: ' + url.replace(/[?#].*/, '...') +
        ': net::ERR_NETWORK_CHANGED (the host\'s interfaces changed), try ' + (i + 1));
    }
  }
}
