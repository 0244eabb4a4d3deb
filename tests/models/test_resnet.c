/* ResNet-50 and its reduced configuration on the CPU backend:
 *   - the parameter counts PyTorch reports for torchvision's ResNet-50 with 10 classes (both
 *     stems), torchvision's state_dict names, the multiply-adds per image;
 *   - amp's comparable peak memory below fp32's at batch 64, by category;
 *   - one fp32 and one amp training step of ResNet-50 (both stems) at batch 4: finite loss;
 *   - the reduced ResNet learns a CIFAR-10 subset in seconds, fp32 and amp.
 * Each layer's backward is checked against finite differences in tests/ops/ref_layers.c; the whole
 * model's forward and backward against torchvision in float64 in peers/checks/torch_check.py (central
 * differences of a whole fp32 ResNet's loss are too noisy to check its wiring: its ReLU kinks and
 * small-batch batch norms bend the loss within any step fp32 can resolve). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_cpu.h"
#include "dp_util.h"
#include "tolerances.h"

static int failures = 0;

static ab_model *make_model(const char *name, int C, int H, int W, int B) {
    ab_train_config c;
    ab_train_config_defaults(&c);
    c.workload = &ab_workloads;
    c.platform = &ab_platform;
    c.model = name;
    c.batch_size = B;
    ab_sample_info si = {.kind = AB_SAMPLE_IMAGE, .C = C, .H = H, .W = W, .n_classes = 10};
    ab_model *m = NULL;
    if (ab_workloads.create_model(&c, &si, NULL, &m) != 0) {
        fprintf(stderr, "FAIL create %s: %s\n", name, ab_error());
        failures++;
    }
    return m;
}

static void test_counts(void) {
    static const struct {
        const char *model;
        long params;
    } want[] = {{"resnet50", 23528522}, {"resnet50-cifar", 23520842}};
    ab_backend *be = ab_backend_cpu_create(1);
    if (!be) {
        fprintf(stderr, "test_resnet: %s\n", ab_error());
        exit(1);
    }
    for (int i = 0; i < 2; i++) {
        ab_model *m = make_model(want[i].model, 3, 32, 32, 2);
        if (!m) continue;
        ab_rng r;
        ab_rng_seed(&r, 1);
        ab_params p;
        AB_CHECK(ab_params_init(&p, be, AB_PREC_FP32, m->specs, m->n_specs, &r) == 0, "%s", ab_error());
        AB_CHECK(ab_model_bind(m, &p) == 0, "bind: %s", ab_error());
        AB_CHECK((long)p.n == want[i].params, "%s: %zu parameters, PyTorch counts %ld", want[i].model, p.n,
                 want[i].params);
        printf("%s: %zu parameters, %zu buffer elements, %.4g multiply-adds per 32x32 image\n", want[i].model, p.n,
               p.n_bufs, m->macs_per_sample);
        /* torchvision's names, and the shapes behind them */
        static const char *const names[] = {"conv1.weight", "bn1.running_var", "layer1.0.downsample.0.weight",
                                            "layer4.2.bn3.bias", "layer3.5.conv2.weight", "fc.weight"};
        for (int k = 0; k < 6; k++) AB_CHECK(ab_params_find(&p, names[k]) >= 0, "%s: no tensor %s", want[i].model, names[k]);
        const int s = ab_params_find(&p, "layer3.5.conv2.weight");
        AB_CHECK(s >= 0 && p.specs[s].shape[0] == 256 && p.specs[s].shape[1] == 3 && p.specs[s].shape[3] == 256 &&
                     p.specs[s].layout == AB_LAYOUT_OHWI,
                 "layer3.5.conv2.weight is not (256, 3, 3, 256) OHWI");
        AB_CHECK(ab_params_find(&p, "layer2.1.downsample.0.weight") < 0, "a downsample where the shape stays");
        /* the CIFAR stem: 3x3 at stride 1 (resolution kept), else 7x7 */
        AB_CHECK(p.specs[0].shape[1] == (i ? 3 : 7), "%s: stem filter %d", want[i].model, p.specs[0].shape[1]);
        /* multiply-adds at 32x32: 7x7/2 stem + max pool leaves 8x8 at layer1 (about 1/16 of the
         * CIFAR stem's work, which keeps 32x32 there: 1.30 G) */
        if (i == 1) AB_CHECK(fabs(m->macs_per_sample - 1.30e9) < 0.02e9, "cifar stem: %.4g MACs", m->macs_per_sample);
        ab_model_destroy(m);
        ab_params_free(&p);
    }
    be->ops->destroy(be);
}

/* a trainer on a small random data set of 3-channel-free IDX images (C = 1) */
/* the trainer keeps a pointer to its configuration: c must outlive it */
static int make_trainer(ab_train_config *c, const char *dir, const char *model, ab_precision prec, int B,
                        ab_run_record *rec, ab_trainer **t) {
    *c = dp_config(dir, prec, B, 0, "self");
    c->model = model;
    /* ResNet-50's first-step gradients at batch 4 reach ~1.3e3 with the torchvision stem at
     * 32x32 (batch norm over 4 values in layer4): times 1024 that overflows fp16, and the scaler
     * would rightly skip the step; 8 keeps the step's values in range */
    c->init_scale = 8.0f;
    return ab_trainer_create(c, rec, t);
}

static void test_memory_and_step(const char *dir) {
    const char *models[2] = {"resnet50", "resnet50-cifar"};
    for (int i = 0; i < 2; i++) {
        size_t peak[2] = {0, 0};
        for (int a = 0; a < 2; a++) {
            ab_train_config cfg;
            ab_run_record rec;
            ab_trainer *t;
            const ab_precision prec = a ? AB_PREC_AMP : AB_PREC_FP32;
            if (make_trainer(&cfg, dir, models[i], prec, 64, &rec, &t) != 0) {
                fprintf(stderr, "FAIL %s: %s\n", models[i], ab_error());
                failures++;
                continue;
            }
            ab_trainer_destroy(t);
            peak[a] = rec.mem.peak_total;
            printf("%s %s batch 64: comparable peak %.1f MB (parameters %.1f, master %.1f, gradients %.1f, "
                   "optimizer %.1f, activations %.1f, workspace %.1f)\n",
                   models[i], ab_precision_name(prec), rec.mem.peak_total / 1e6,
                   rec.mem.peak[AB_MEM_PARAMETERS] / 1e6, rec.mem.peak[AB_MEM_MASTER] / 1e6,
                   rec.mem.peak[AB_MEM_GRADIENTS] / 1e6, rec.mem.peak[AB_MEM_OPTIMIZER] / 1e6,
                   rec.mem.peak[AB_MEM_ACTIVATIONS] / 1e6, rec.mem.peak[AB_MEM_WORKSPACE] / 1e6);
            ab_run_record_free(&rec);
        }
        AB_CHECK(peak[1] > 0 && peak[1] < peak[0], "%s: amp's comparable peak %zu is not below fp32's %zu", models[i],
                 peak[1], peak[0]);
        /* one step at batch 4 in each precision: a finite loss */
        for (int a = 0; a < 2; a++) {
            ab_train_config cfg;
            ab_run_record rec;
            ab_trainer *t;
            const ab_precision prec = a ? AB_PREC_AMP : AB_PREC_FP32;
            if (make_trainer(&cfg, dir, models[i], prec, 4, &rec, &t) != 0) {
                fprintf(stderr, "FAIL %s: %s\n", models[i], ab_error());
                failures++;
                continue;
            }
            const int32_t order[4] = {0, 1, 2, 3};
            ab_step_result r = {.loss = NAN};
            AB_CHECK(ab_trainer_step(t, order, 4, 0, 1, &r) == 0, "%s step: %s", models[i], ab_error());
            const double loss = r.loss;
            AB_CHECK(isfinite(loss) && loss > 0.5 && loss < 20.0, "%s %s: loss %g after one step", models[i],
                     ab_precision_name(prec), loss);
            AB_CHECK(r.applied, "%s %s: the first step was skipped", models[i], ab_precision_name(prec));
            printf("%s %s batch 4: one step, loss %.4f\n", models[i], ab_precision_name(prec), loss);
            ab_trainer_destroy(t);
            ab_run_record_free(&rec);
        }
    }
}

/* resnet-tiny on the first 1,000 CIFAR-10 training images, 3 epochs, batch 16: the loss falls and the
 * test accuracy on 500 images is well above chance (10%; its standard deviation at chance over
 * 500 images is 1.3 points, so 20% is 7 of them) */
static void test_learns(void) {
    for (int a = 0; a < 2; a++) {
        ab_train_config c;
        ab_train_config_defaults(&c);
        c.workload = &ab_workloads;
        c.platform = &ab_platform;
        c.model = "resnet-tiny";
        c.dataset = "cifar10";
        c.train_subset = 1000;
        c.test_subset = 500;
        c.batch_size = 16;
        c.augment = 0; /* learns faster in 3 epochs; augmentation is tested in test_cifar */
        c.epochs = 3;
        c.lr = 0.05f;
        c.momentum = 0.9f;
        c.weight_decay = 5e-4f;
        c.precision = a ? AB_PREC_AMP : AB_PREC_FP32;
        c.quiet = 1;
        ab_run_record rec;
        if (ab_train_run(&c, &rec) != 0) {
            fprintf(stderr, "FAIL resnet-tiny %s on CIFAR-10: %s\n", ab_precision_name(c.precision), ab_error());
            failures++;
            continue;
        }
        const ab_epoch_record *e = rec.epochs;
        AB_CHECK(rec.n_epochs == 3 && e[2].train_loss < e[0].train_loss - 0.2,
                 "resnet-tiny %s: the training loss did not fall (%.3f -> %.3f)", ab_precision_name(c.precision),
                 e[0].train_loss, e[2].train_loss);
        AB_CHECK(e[2].test_accuracy > 20.0, "resnet-tiny %s: test accuracy %.1f%%, chance is 10%%",
                 ab_precision_name(c.precision), e[2].test_accuracy);
        printf("resnet-tiny %s on 1000 CIFAR-10 images, 3 epochs: train loss %.3f -> %.3f, test accuracy %.1f%%\n",
               ab_precision_name(c.precision), e[0].train_loss, e[2].train_loss, e[2].test_accuracy);
        ab_run_record_free(&rec);
    }
}

int main(void) {
    test_counts();
    test_learns();
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/ab_test_resnet.%ld", (long)getpid());
    if (mkdir(dir, 0700) != 0 || dp_write_dataset(dir, 64, 16, 32, 32, 3) != 0) {
        fprintf(stderr, "FAIL cannot write a data set under %s\n", dir);
        return 1;
    }
    test_memory_and_step(dir);
    dp_remove_dataset(dir);
    if (failures) fprintf(stderr, "test_resnet: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
