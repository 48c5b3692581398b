from django.urls import path

from console import views

app_name = "console"

urlpatterns = [
    path("", views.console_page, name="index"),
    path("login/", views.ConsoleLoginView.as_view(), name="login"),
    path("logout/", views.ConsoleLogoutView.as_view(), name="logout"),
]
