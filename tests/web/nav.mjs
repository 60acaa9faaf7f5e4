// tests/web/nav.mjs: navigation that survives Chromium's
// net::ERR_NETWORK_CHANGED. Chromium aborts a navigation in flight when
// the host's network interfaces or addresses change, and the suite's
// other tests make and remove veth pairs and namespaces on this host all
// the time (tests/run.sh runs several at once): seen in full runs, never
// alone. Such a navigation is tried again (5 tries at most, each said);
// any other error is thrown at once, with the network error Chromium gave
// the page's request when there was one.
//
// Playwright does not always name the network error: when Chromium has
// already put its error page in, goto says only that the navigation "is
// interrupted by another navigation to chrome-error://chromewebdata/" (a
// full run failed test_interactive_proxy_tls so, under load, beside the
// interactive tests). The main frame's failed request says what it was.
export async function gotoRetrying(page, url, options) {
  for (let i = 1; ; i++) {
    let failed = '';
    const onFailed = (req) => {
      if (req.isNavigationRequest() && req.frame() === page.mainFrame())
        failed = (req.failure() && req.failure().errorText) || 'failed';
    };
    page.on('requestfailed', onFailed);
    try {
      return await page.goto(url, options);
    } catch (e) {
      const why = String(e && e.message);
      const changed = why.includes('ERR_NETWORK_CHANGED') ||
        failed.includes('ERR_NETWORK_CHANGED');
      if (failed !== '' && !why.includes(failed) && e instanceof Error)
        e.message = why + '\n(the page\'s request failed: ' + failed + ')';
      if (i >= 5 || !changed) throw e;
      console.log('retry: ' + url.replace(/[?#].*/, '...') +
        ': net::ERR_NETWORK_CHANGED (the host\'s interfaces changed), try ' + (i + 1));
    } finally {
      page.off('requestfailed', onFailed);
    }
  }
}
