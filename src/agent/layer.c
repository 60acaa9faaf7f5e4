/*
 * layer.c: the layer unpacker of layer.h. One loop reads the archive and
 * checks every entry; with a target directory it also writes, always
 * relative to directory descriptors resolved without following links.
 */
#include "agent/layer.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gp.h"
#include "common/oci.h"
#include "util.h"

#define PATH_CLEAN_MAX 4097
#define BLOCK          (256 * 1024)

void
gp_layer_limits_default(struct gp_layer_limits *lim)
{
	lim->max_bytes = 64LL << 30;
	lim->max_entries = 1000000;
	lim->max_ratio = 200;
	lim->ratio_floor = 64LL << 20;
}

/* 1 when target, read from the directory of link_path, climbs out. */
static int
link_escapes(const char *link_path, const char *target)
{
	const char *p, *end;
	int depth = 0;
	size_t len;

	if (target[0] != '/') {
		/* Start in the link's directory: one level per component. */
		for (p = link_path; *p != '\0'; p++)
			if (*p == '/')
				depth++;
	}
	for (p = target; *p != '\0'; p = end) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		end = strchr(p, '/');
		if (end == NULL)
			end = p + strlen(p);
		len = (size_t)(end - p);
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				return 1;
		} else if (!(len == 1 && p[0] == '.')) {
			depth++;
		}
	}
	return 0;
}

int
gp_layer_entry_check(const char *path, unsigned type, const char *link,
    char *clean, size_t cleanlen, char *clean_link, size_t linklen,
    enum gp_layer_action *action, char *err, size_t errlen)
{
	const char *base, *p;
	char why[300];

	*action = GP_LAYER_SKIP;
	if (clean_link != NULL && linklen > 0)
		clean_link[0] = '\0';
	if (path == NULL)
		return gp_fail(err, errlen, GP_EINVAL,
		    "an entry without a name");
	if (gp_archive_path_clean(path, clean, cleanlen, why, sizeof(why)) != 0)
		return gp_fail(err, errlen, GP_EINVAL, "entry '%.200s': %s",
		    path, why);
	switch (type) {
	case S_IFCHR:
	case S_IFBLK:
		return gp_fail(err, errlen, GP_EINVAL,
		    "entry '%.200s': device nodes are "
		    "not allowed in a layer",
		    path);
	case S_IFIFO:
		return gp_fail(err, errlen, GP_EINVAL,
		    "entry '%.200s': fifos are not "
		    "allowed in a layer",
		    path);
	case S_IFSOCK:
		return gp_fail(err, errlen, GP_EINVAL,
		    "entry '%.200s': sockets are not "
		    "allowed in a layer",
		    path);
	case S_IFREG:
	case S_IFDIR:
	case S_IFLNK:
		break;
	default:
		if (link == NULL || type != 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "entry '%.200s': unknown "
			    "file type",
			    path);
	}
	if (clean[0] == '\0') {
		if (type != S_IFDIR)
			return gp_fail(err, errlen, GP_EINVAL,
			    "entry '%.200s': the layer's "
			    "root must be a directory",
			    path);
		return 0;
	}
	base = strrchr(clean, '/');
	base = base != NULL ? base + 1 : clean;
	for (p = clean; p < base; p = strchr(p, '/') + 1)
		if (strncmp(p, ".wh.", 4) == 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "entry '%.200s': a whiteout "
			    "name used as a directory (unsupported aufs "
			    "metadata)",
			    path);
	if (strncmp(base, ".wh.", 4) == 0) {
		if (type == S_IFDIR || type == S_IFLNK)
			return gp_fail(err, errlen, GP_EINVAL,
			    "entry '%.200s': a whiteout "
			    "must be a plain file",
			    path);
		if (strcmp(base, ".wh..wh..opq") == 0) {
			/* The directory holding it becomes opaque. */
			if (base == clean)
				clean[0] = '\0';
			else
				clean[base - clean - 1] = '\0';
			*action = GP_LAYER_OPAQUE;
			return 0;
		}
		if (strncmp(base, ".wh..wh.", 8) == 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "entry '%.200s': unsupported "
			    "aufs metadata",
			    path);
		if (base[4] == '\0' || strcmp(base + 4, ".") == 0 ||
		    strcmp(base + 4, "..") == 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "entry '%.200s': a whiteout "
			    "of nothing",
			    path);
		memmove((char *)base, base + 4, strlen(base + 4) + 1);
		*action = GP_LAYER_WHITEOUT;
		return 0;
	}
	if (link != NULL && type != S_IFLNK) {
		/* A hard link: to a file of this layer, by a clean path. */
		if (gp_archive_path_clean(link, clean_link, linklen, why,
		        sizeof(why)) != 0 ||
		    clean_link[0] == '\0')
			return gp_fail(err, errlen, GP_EINVAL,
			    "entry '%.200s': hard link "
			    "target '%.200s' escapes the layer (%s)",
			    path, link,
			    clean_link[0] == '\0' && why[0] == '\0' ? "its root"
			                                            : why);
		if (strcmp(clean_link, clean) == 0)
			return gp_fail(err, errlen, GP_EINVAL,
			    "entry '%.200s': a hard "
			    "link to itself",
			    path);
		*action = GP_LAYER_HARDLINK;
		return 0;
	}
	switch (type) {
	case S_IFDIR:
		*action = GP_LAYER_DIR;
		return 0;
	case S_IFREG:
		*action = GP_LAYER_FILE;
		return 0;
	default:
		break;
	}
	/* A symbolic link. */
	if (link == NULL || link[0] == '\0' || strlen(link) > 4096)
		return gp_fail(err, errlen, GP_EINVAL,
		    "entry '%.200s': a symbolic link "
		    "needs a target of 1 to 4096 bytes",
		    path);
	for (p = link; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20)
			return gp_fail(err, errlen, GP_EINVAL,
			    "entry '%.200s': control "
			    "character in the link target",
			    path);
	if (link_escapes(clean, link))
		return gp_fail(err, errlen, GP_EINVAL,
		    "entry '%.200s': symbolic link to "
		    "'%.200s' escapes the layer",
		    path, link);
	*action = GP_LAYER_SYMLINK;
	return 0;
}

/* ---- writing ---- */

struct unpack {
	const char *dir; /* NULL: scan only */
	int rootfd;
	json_t *files;  /* scan: regular files seen */
	json_t *links;  /* scan: symbolic links seen */
	int xattr_user; /* opaque dirs use user.overlay.opaque */
	char *err;
	size_t errlen;
};

static int
openat2_beneath(int dirfd, const char *path, int flags)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/*
 * The directory of clean (created as needed, 0755), opened beneath the
 * root without following links. OUT: *name points at the last component.
 * Returns an fd, or -1 with u->err set (errno ELOOP/EXDEV: through a link).
 */
static int
open_parent(struct unpack *u, const char *clean, const char **name,
    int *refused)
{
	char parent[PATH_CLEAN_MAX], *slash, *p;
	int fd, sub;

	*refused = 0;
	gp_strlcpy(parent, clean, sizeof(parent));
	slash = strrchr(parent, '/');
	if (slash == NULL) {
		*name = clean;
		fd = fcntl(u->rootfd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			snprintf(u->err, u->errlen, "dup: %s", strerror(errno));
		return fd;
	}
	*slash = '\0';
	*name = clean + (slash - parent) + 1;
	fd = openat2_beneath(u->rootfd, parent, O_RDONLY | O_DIRECTORY);
	if (fd >= 0)
		return fd;
	if (errno != ENOENT)
		goto bad;
	/* Create the missing directories, one component at a time. */
	fd = fcntl(u->rootfd, F_DUPFD_CLOEXEC, 0);
	for (p = parent; fd >= 0 && *p != '\0';) {
		char *end = strchr(p, '/');
		if (end != NULL)
			*end = '\0';
		if (mkdirat(fd, p, 0755) != 0 && errno != EEXIST) {
			close(fd);
			goto bad;
		}
		sub = openat2_beneath(fd, p, O_RDONLY | O_DIRECTORY);
		close(fd);
		fd = sub;
		if (fd < 0)
			goto bad;
		p = end != NULL ? end + 1 : p + strlen(p);
	}
	return fd;
bad:
	if (errno == ELOOP || errno == EXDEV || errno == ENOTDIR ||
	    errno == EAGAIN) {
		*refused = 1;
		snprintf(u->err, u->errlen,
		    "entry '%.200s' goes through a "
		    "symbolic link or a non-directory (an escape)",
		    clean);
	} else
		snprintf(u->err, u->errlen,
		    "entry '%.200s': cannot open its "
		    "directory: %s",
		    clean, strerror(errno));
	return -1;
}

/* Removes name in dirfd whatever it is (a directory with its content). */
static int
remove_at(struct unpack *u, int dirfd, const char *name, const char *clean)
{
	char full[PATH_MAX + PATH_CLEAN_MAX];
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0);
	/* Its path has no link in it (its parent was opened beneath). */
	snprintf(full, sizeof(full), "%s/%s", u->dir, clean);
	return gp_remove_tree(full) == 0 ? 0 : -1;
}

static int
write_file(struct unpack *u, struct archive *a, int fd, const char *clean,
    const struct gp_layer_limits *lim, struct gp_layer_stats *st,
    int64_t compressed)
{
	char *buf = malloc(BLOCK);
	la_ssize_t n;

	if (buf == NULL) {
		snprintf(u->err, u->errlen, "out of memory");
		return GP_ENOMEM;
	}
	for (;;) {
		n = archive_read_data(a, buf, BLOCK);
		if (n == 0)
			break;
		if (n < 0) {
			snprintf(u->err, u->errlen, "entry '%.200s': %s", clean,
			    archive_error_string(a) ? archive_error_string(a)
			                            : "read error");
			free(buf);
			return GP_EINVAL;
		}
		st->bytes += n;
		st->stream_bytes = archive_filter_bytes(a, 0);
		if (st->bytes > lim->max_bytes) {
			snprintf(u->err, u->errlen,
			    "the layer unpacks to more "
			    "than %lld bytes",
			    (long long)lim->max_bytes);
			free(buf);
			return GP_ETOOBIG;
		}
		if (st->stream_bytes > lim->ratio_floor && compressed > 0 &&
		    st->stream_bytes / compressed > lim->max_ratio) {
			snprintf(u->err, u->errlen,
			    "decompression bomb: %lld "
			    "bytes of layer unpack to more than %lld bytes "
			    "(ratio over %lld)",
			    (long long)compressed, (long long)st->stream_bytes,
			    (long long)lim->max_ratio);
			free(buf);
			return GP_ETOOBIG;
		}
		if (fd >= 0 && gp_write_all(fd, buf, (size_t)n) != 0) {
			snprintf(u->err, u->errlen, "entry '%.200s': write: %s",
			    clean, strerror(errno));
			free(buf);
			return GP_EIO;
		}
	}
	free(buf);
	return 0;
}

/* 1 when a proper prefix of clean is a symbolic link seen (scan mode). */
static int
through_link(json_t *links, const char *clean)
{
	char prefix[PATH_CLEAN_MAX];
	const char *p;

	for (p = strchr(clean, '/'); p != NULL; p = strchr(p + 1, '/')) {
		size_t n = (size_t)(p - clean);
		memcpy(prefix, clean, n);
		prefix[n] = '\0';
		if (json_object_get(links, prefix) != NULL)
			return 1;
	}
	return 0;
}

/* Applies one checked entry. Returns 0 or a GP_E* with u->err. */
static int
apply(struct unpack *u, struct archive *a, struct archive_entry *e,
    enum gp_layer_action action, const char *clean, const char *clean_link,
    const struct gp_layer_limits *lim, struct gp_layer_stats *st,
    int64_t compressed)
{
	mode_t mode = archive_entry_perm(e) & 07777 & ~(mode_t)06000;
	const char *name, *tname;
	int dfd = -1, tfd = -1, fd = -1, refused, ret = GP_EIO;
	struct stat sb;

	if (u->dir == NULL) {
		/* Scan only: the same decisions, on recorded paths. */
		if (clean[0] != '\0' && through_link(u->links, clean))
			return gp_fail(u->err, u->errlen, GP_EINVAL,
			    "entry '%.200s' goes "
			    "through a symbolic link (an escape)",
			    clean);
		if (action == GP_LAYER_HARDLINK &&
		    (json_object_get(u->files, clean_link) == NULL ||
		        through_link(u->links, clean_link)))
			return gp_fail(u->err, u->errlen, GP_EINVAL,
			    "entry '%.200s': hard "
			    "link to '%.200s', which is no file of this layer",
			    clean, clean_link);
		if (action == GP_LAYER_FILE || action == GP_LAYER_HARDLINK)
			json_object_set_new(u->files, clean, json_true());
		else
			json_object_del(u->files, clean);
		if (action == GP_LAYER_SYMLINK)
			json_object_set_new(u->links, clean, json_true());
		else
			json_object_del(u->links, clean);
		if (action == GP_LAYER_FILE)
			return write_file(u, a, -1, clean, lim, st, compressed);
		return 0;
	}
	if (action == GP_LAYER_OPAQUE) {
		char inside[PATH_CLEAN_MAX + 4];

		/* The directory itself (made if this comes before it). */
		if (clean[0] == '\0')
			dfd = fcntl(u->rootfd, F_DUPFD_CLOEXEC, 0);
		else {
			snprintf(inside, sizeof(inside), "%s/x", clean);
			dfd = open_parent(u, inside, &name, &refused);
			if (dfd < 0)
				return refused ? GP_EINVAL : GP_EIO;
		}
		if (dfd < 0) {
			snprintf(u->err, u->errlen, "dup: %s", strerror(errno));
			return GP_EIO;
		}
		if (!u->xattr_user &&
		    fsetxattr(dfd, "trusted.overlay.opaque", "y", 1, 0) != 0 &&
		    (errno == EPERM || errno == ENOTSUP))
			u->xattr_user = 1;
		if (u->xattr_user &&
		    fsetxattr(dfd, "user.overlay.opaque", "y", 1, 0) != 0) {
			snprintf(u->err, u->errlen,
			    "cannot mark '%.200s' "
			    "opaque for overlayfs: %s",
			    clean, strerror(errno));
			close(dfd);
			return GP_EIO;
		}
		st->opaques++;
		close(dfd);
		return 0;
	}
	if ((dfd = open_parent(u, clean, &name, &refused)) < 0)
		return refused ? GP_EINVAL : GP_EIO;
	switch (action) {
	case GP_LAYER_DIR:
		if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    !S_ISDIR(sb.st_mode) && remove_at(u, dfd, name, clean) != 0)
			goto io;
		if (mkdirat(dfd, name, 0700) != 0 && errno != EEXIST)
			goto io;
		/* The owner (the agent) keeps rwx: later entries go in. */
		if (fchmodat(dfd, name, (mode & 01777) | 0700, 0) != 0)
			goto io;
		break;
	case GP_LAYER_FILE:
		if (remove_at(u, dfd, name, clean) != 0)
			goto io;
		fd = openat(dfd, name,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			goto io;
		ret = write_file(u, a, fd, clean, lim, st, compressed);
		if (ret == 0 && fchmod(fd, (mode & 0777) | 0600) != 0) {
			snprintf(u->err, u->errlen, "chmod '%.200s': %s", clean,
			    strerror(errno));
			ret = GP_EIO;
		}
		close(fd);
		close(dfd);
		return ret;
	case GP_LAYER_SYMLINK:
		if (remove_at(u, dfd, name, clean) != 0 ||
		    symlinkat(archive_entry_symlink(e), dfd, name) != 0)
			goto io;
		break;
	case GP_LAYER_HARDLINK:
		if ((tfd = open_parent(u, clean_link, &tname, &refused)) < 0) {
			close(dfd);
			return refused ? GP_EINVAL : GP_EIO;
		}
		if (fstatat(tfd, tname, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(sb.st_mode)) {
			close(tfd);
			close(dfd);
			return gp_fail(u->err, u->errlen, GP_EINVAL,
			    "entry '%.200s': hard "
			    "link to '%.200s', which is no file of this layer",
			    clean, clean_link);
		}
		if (remove_at(u, dfd, name, clean) != 0 ||
		    linkat(tfd, tname, dfd, name, 0) != 0) {
			close(tfd);
			goto io;
		}
		close(tfd);
		break;
	case GP_LAYER_WHITEOUT:
		if (remove_at(u, dfd, name, clean) != 0)
			goto io;
		if (mknodat(dfd, name, S_IFCHR | 0600, makedev(0, 0)) != 0) {
			snprintf(u->err, u->errlen,
			    "cannot create the overlayfs "
			    "whiteout for '%.200s': %s (the agent needs "
			    "CAP_MKNOD to unpack layers with deletions)",
			    clean, strerror(errno));
			close(dfd);
			return GP_EIO;
		}
		st->whiteouts++;
		break;
	default:
		break;
	}
	close(dfd);
	return 0;
io:
	snprintf(u->err, u->errlen, "entry '%.200s': %s", clean,
	    strerror(errno));
	close(dfd);
	return GP_EIO;
}

/* The loop shared by unpack and scan; a is open. */
static int
run(struct unpack *u, struct archive *a, const struct gp_layer_limits *lim,
    struct gp_layer_stats *st, int64_t compressed)
{
	struct archive_entry *e;
	enum gp_layer_action action;
	char clean[PATH_CLEAN_MAX], clean_link[PATH_CLEAN_MAX];
	const char *link;
	unsigned type;
	int r, ret;

	for (;;) {
		r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			return 0;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
			return gp_fail(u->err, u->errlen, GP_EINVAL,
			    "not a valid layer "
			    "archive (tar, tar+gzip or tar+zstd): %.200s",
			    archive_error_string(a) ? archive_error_string(a)
			                            : "read error");
		if (++st->entries > lim->max_entries) {
			snprintf(u->err, u->errlen,
			    "more than %lld entries in "
			    "the layer",
			    (long long)lim->max_entries);
			return GP_ETOOBIG;
		}
		st->stream_bytes = archive_filter_bytes(a, 0);
		if (st->stream_bytes > lim->ratio_floor && compressed > 0 &&
		    st->stream_bytes / compressed > lim->max_ratio) {
			snprintf(u->err, u->errlen,
			    "decompression bomb: the "
			    "layer's stream grows past %lld times its size",
			    (long long)lim->max_ratio);
			return GP_ETOOBIG;
		}
		type = archive_entry_filetype(e);
		link = archive_entry_hardlink(e);
		if (link == NULL && type == AE_IFLNK)
			link = archive_entry_symlink(e);
		ret = gp_layer_entry_check(archive_entry_pathname(e), type,
		    link, clean, sizeof(clean), clean_link, sizeof(clean_link),
		    &action, u->err, u->errlen);
		if (ret != 0)
			return ret;
		if (action == GP_LAYER_SKIP)
			continue;
		if ((ret = apply(u, a, e, action, clean, clean_link, lim, st,
		         compressed)) != 0)
			return ret;
	}
}

static struct archive *
reader(void)
{
	struct archive *a = archive_read_new();

	if (a == NULL)
		return NULL;
	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	return a;
}

int
gp_layer_unpack(const char *blob, const char *dir,
    const struct gp_layer_limits *lim, struct gp_layer_stats *st, char *err,
    size_t errlen)
{
	struct gp_layer_limits def;
	struct unpack u;
	struct archive *a = NULL;
	struct stat sb;
	int ret = GP_EIO, fd = -1;

	memset(st, 0, sizeof(*st));
	memset(&u, 0, sizeof(u));
	u.err = err;
	u.errlen = errlen;
	u.dir = dir;
	u.rootfd = -1;
	if (errlen > 0)
		err[0] = '\0';
	if (lim == NULL) {
		gp_layer_limits_default(&def);
		lim = &def;
	}
	if (mkdir(dir, 0755) != 0) {
		snprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
		return GP_EIO;
	}
	if ((u.rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (fd = open(blob, O_RDONLY | O_CLOEXEC)) < 0 ||
	    fstat(fd, &sb) != 0) {
		snprintf(err, errlen, "open: %s", strerror(errno));
		goto out;
	}
	if ((a = reader()) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (archive_read_open_fd(a, fd, BLOCK) != ARCHIVE_OK) {
		ret = gp_fail(err, errlen, GP_EINVAL,
		    "not a valid layer archive: %.200s",
		    archive_error_string(a) ? archive_error_string(a) : "?");
		goto out;
	}
	ret = run(&u, a, lim, st, (int64_t)sb.st_size);
	if (ret == 0 && syncfs(u.rootfd) != 0) {
		snprintf(err, errlen, "syncfs: %s", strerror(errno));
		ret = GP_EIO;
	}
out:
	if (a != NULL)
		archive_read_free(a);
	if (fd >= 0)
		close(fd);
	if (u.rootfd >= 0)
		close(u.rootfd);
	if (ret != 0)
		gp_remove_tree(dir);
	return ret;
}

int
gp_layer_scan_memory(const void *data, size_t len,
    const struct gp_layer_limits *lim, struct gp_layer_stats *st, char *err,
    size_t errlen)
{
	struct gp_layer_limits def;
	struct unpack u;
	struct archive *a;
	int ret;

	memset(st, 0, sizeof(*st));
	memset(&u, 0, sizeof(u));
	u.err = err;
	u.errlen = errlen;
	u.rootfd = -1;
	if (lim == NULL) {
		gp_layer_limits_default(&def);
		lim = &def;
	}
	u.files = json_object();
	u.links = json_object();
	if (u.files == NULL || u.links == NULL || (a = reader()) == NULL) {
		json_decref(u.files);
		json_decref(u.links);
		return GP_ENOMEM;
	}
	if (archive_read_open_memory(a, data, len) != ARCHIVE_OK)
		ret = gp_fail(err, errlen, GP_EINVAL,
		    "not a valid layer archive: %.200s",
		    archive_error_string(a) ? archive_error_string(a) : "?");
	else
		ret = run(&u, a, lim, st, (int64_t)len);
	archive_read_free(a);
	json_decref(u.files);
	json_decref(u.links);
	return ret;
}
