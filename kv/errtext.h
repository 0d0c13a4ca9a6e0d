/* errtext.h - sets the text kv_error_text returns (status.c). Internal. */
#ifndef KV_ERRTEXT_H
#define KV_ERRTEXT_H

/* Formats the message of an error this thread is about to return: name the
 * file first. Returns rc, so that `return kv_error_set(KV_ECORRUPT, ...)`
 * reads as one statement. */
int kv_error_set(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* KV_ERRTEXT_H */
