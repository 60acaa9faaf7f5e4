/*
 * tls_auto.c: the coordinator's own CA and certificate (issue 15). A
 * coordinator that listens beyond loopback without --tls-cert makes, at
 * its first start, DATA/tls/ca.key and ca.crt (a P-256 CA, ten years) and
 * a server key and certificate signed by it (server.key, chain.pem: the
 * certificate, then the CA's), with OpenSSL's command line; later starts
 * use them again. The CA's pin (SHA-256 of its public key) goes into the
 * tokens it hands out, so that agents and the CLI verify it with nothing
 * to copy (common/http_client.c). Runs at start, before any thread.
 * With --proxy-listen, the same CA signs the job port proxy's own
 * certificate, for the wildcard "*.DOMAIN" of its per-job host names.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coordd.h"
#include "gp.h"
#include "http_client.h"
#include "log.h"
#include "util.h"

/* Runs openssl with argv (NULL-ended), its output appended to logpath. */
static int
run_openssl(char *const argv[], const char *logpath)
{
	pid_t pid;
	int status, fd;

	if ((pid = fork()) < 0)
		return GP_EIO;
	if (pid == 0) {
		fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
		    0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp("openssl", argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return GP_EIO;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : GP_EIO;
}

static int
exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* Writes chain: the certificate crt, then the CA's ca_crt. */
static int
write_chain(const char *chain, const char *crt, const char *ca_crt)
{
	char *text = NULL, *ca_text = NULL;
	size_t n, ca_n;
	int ret = GP_EIO;
	FILE *f;

	if (gp_read_file(crt, 1 << 20, &text, &n) != 0 ||
	    gp_read_file(ca_crt, 1 << 20, &ca_text, &ca_n) != 0)
		goto out;
	if ((f = fopen(chain, "w")) == NULL)
		goto out;
	if (fwrite(text, 1, n, f) == n && fwrite(ca_text, 1, ca_n, f) == ca_n)
		ret = 0;
	if (fclose(f) != 0)
		ret = GP_EIO;
out:
	free(text);
	free(ca_text);
	return ret;
}

/* Makes the CA, the server's key and certificate in dir. */
static int
make_certificates(const char *dir, const char *listen_addr)
{
	char ca_key[PATH_MAX], ca_crt[PATH_MAX], key[PATH_MAX], csr[PATH_MAX];
	char crt[PATH_MAX], ext[PATH_MAX], logp[PATH_MAX], chain[PATH_MAX];
	char host[256], san[512];
	int ret;

	snprintf(ca_key, sizeof(ca_key), "%.900s/ca.key", dir);
	snprintf(ca_crt, sizeof(ca_crt), "%.900s/ca.crt", dir);
	snprintf(key, sizeof(key), "%.900s/server.key", dir);
	snprintf(csr, sizeof(csr), "%.900s/server.csr", dir);
	snprintf(crt, sizeof(crt), "%.900s/server.crt", dir);
	snprintf(ext, sizeof(ext), "%.900s/server.ext", dir);
	snprintf(logp, sizeof(logp), "%.900s/openssl.log", dir);
	snprintf(chain, sizeof(chain), "%.900s/chain.pem", dir);
	if (gethostname(host, sizeof(host)) != 0)
		gp_strlcpy(host, "localhost", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(san, sizeof(san), "subjectAltName=IP:127.0.0.1,"
	    "DNS:localhost,DNS:%s%s%s\nbasicConstraints=critical,CA:FALSE\n"
	    "extendedKeyUsage=serverAuth\n", host,
	    strcmp(listen_addr, "0.0.0.0") != 0 ? ",IP:" : "",
	    strcmp(listen_addr, "0.0.0.0") != 0 ? listen_addr : "");
	if (gp_write_file(ext, san, strlen(san), 0600) != 0)
		return GP_EIO;
	{
		char *ca_argv[] = {"openssl", "req", "-x509", "-newkey", "ec",
		    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
		    "-days", "3650", "-sha256", "-subj",
		    "/CN=gpupool coordinator CA", "-addext",
		    "basicConstraints=critical,CA:TRUE", "-addext",
		    "keyUsage=critical,keyCertSign,cRLSign", "-keyout", ca_key,
		    "-out", ca_crt, NULL};
		char *key_argv[] = {"openssl", "req", "-newkey", "ec",
		    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
		    "-subj", "/CN=gpupool coordinator", "-keyout", key, "-out",
		    csr, NULL};
		char *sign_argv[] = {"openssl", "x509", "-req", "-in", csr,
		    "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-days",
		    "3650", "-sha256", "-extfile", ext, "-out", crt, NULL};

		if (run_openssl(ca_argv, logp) != 0 ||
		    run_openssl(key_argv, logp) != 0 ||
		    run_openssl(sign_argv, logp) != 0) {
			gp_error("openssl could not make the coordinator's "
			    "certificates; see %s", logp);
			return GP_EIO;
		}
	}
	/* What the server sends: its certificate, then the CA's. */
	ret = write_chain(chain, crt, ca_crt);
	unlink(csr);
	return ret;
}

int
tls_auto_proxy_cert(const struct coord_config *cfg, const char *domain,
    char *cert, char *key)
{
	char dir[PATH_MAX], ca_key[PATH_MAX], ca_crt[PATH_MAX], csr[PATH_MAX];
	char crt[PATH_MAX], ext[PATH_MAX], logp[PATH_MAX], san[400];

	snprintf(dir, sizeof(dir), "%.900s/tls", cfg->data_dir);
	snprintf(ca_key, sizeof(ca_key), "%.900s/ca.key", dir);
	snprintf(ca_crt, sizeof(ca_crt), "%.900s/ca.crt", dir);
	/* The domain is a DNS name (main.c checked): safe in a file name. */
	snprintf(key, PATH_MAX, "%.900s/proxy-%.200s.key", dir, domain);
	snprintf(cert, PATH_MAX, "%.900s/proxy-%.200s-chain.pem", dir, domain);
	if (exists(cert) && exists(key))
		return 0;
	snprintf(csr, sizeof(csr), "%.900s/proxy.csr", dir);
	snprintf(crt, sizeof(crt), "%.900s/proxy.crt", dir);
	snprintf(ext, sizeof(ext), "%.900s/proxy.ext", dir);
	snprintf(logp, sizeof(logp), "%.900s/openssl.log", dir);
	snprintf(san, sizeof(san), "subjectAltName=DNS:*.%s\n"
	    "basicConstraints=critical,CA:FALSE\n"
	    "extendedKeyUsage=serverAuth\n", domain);
	if (gp_write_file(ext, san, strlen(san), 0600) != 0)
		return GP_EIO;
	{
		char *key_argv[] = {"openssl", "req", "-newkey", "ec",
		    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
		    "-subj", "/CN=gpupool job port proxy", "-keyout", key,
		    "-out", csr, NULL};
		char *sign_argv[] = {"openssl", "x509", "-req", "-in", csr,
		    "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-days",
		    "3650", "-sha256", "-extfile", ext, "-out", crt, NULL};

		if (run_openssl(key_argv, logp) != 0 ||
		    run_openssl(sign_argv, logp) != 0 ||
		    write_chain(cert, crt, ca_crt) != 0) {
			gp_error("openssl could not make the proxy's "
			    "certificate; see %s", logp);
			unlink(cert);
			unlink(csr);
			return GP_EIO;
		}
	}
	unlink(csr);
	gp_info("made the job port proxy's certificate name=*.%s", domain);
	return 0;
}

int
tls_auto_setup(struct coord_config *cfg)
{
	char dir[PATH_MAX], ca_crt[PATH_MAX];

	snprintf(dir, sizeof(dir), "%.900s/tls", cfg->data_dir);
	snprintf(ca_crt, sizeof(ca_crt), "%.900s/ca.crt", dir);
	snprintf(cfg->tls_cert, sizeof(cfg->tls_cert), "%.900s/chain.pem",
	    dir);
	snprintf(cfg->tls_key, sizeof(cfg->tls_key), "%.900s/server.key", dir);
	if (gp_mkdir_p(dir, 0700) != 0) {
		gp_error("cannot create %s: %s", dir, strerror(errno));
		return GP_EIO;
	}
	if (!exists(ca_crt) || !exists(cfg->tls_cert) ||
	    !exists(cfg->tls_key)) {
		if (make_certificates(dir, cfg->listen_addr) != 0)
			return GP_EIO;
		gp_info("made the coordinator's own CA and certificate dir=%s",
		    dir);
	}
	if (gp_tls_pin_of_file(ca_crt, cfg->tls_pin) != 0) {
		gp_error("cannot read the CA certificate %s", ca_crt);
		return GP_EIO;
	}
	return 0;
}
