#include <stdio.h>

static int square(int x) {
    return x * x;
}

int main(void) {
    for (int i = 1; i <= 3; i++) {
        printf("%d squared is %d\n", i, square(i));
    }
    return 0;
}
