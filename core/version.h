/* Source revision ampbench was built from (generated into the build tree at every build). */
#ifndef AB_VERSION_H
#define AB_VERSION_H

const char *ab_git_commit(void); /* "unknown" where git could not say */
int ab_git_dirty(void);          /* 1 tracked files changed, 0 clean, -1 unknown */

#endif
