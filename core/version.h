/* Source revision ampbench was built from (generated into the build tree at every build). */
#ifndef AB_VERSION_H
#define AB_VERSION_H

const char *ab_git_commit(void);
int ab_git_dirty(void);

#endif
