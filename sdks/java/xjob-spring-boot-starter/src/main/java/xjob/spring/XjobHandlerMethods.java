package xjob.spring;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.annotation.AnnotatedElementUtils;
import xjob.executor.JobContext;
import xjob.executor.JobHandler;

/**
 * Collects the {@link XjobHandler} methods of every bean as it is initialised, as handlers by
 * name. A wrong signature or a name used twice fails the application's start with a message
 * naming both methods.
 */
public class XjobHandlerMethods implements BeanPostProcessor {
  private final Map<String, JobHandler> handlers = new LinkedHashMap<>();
  private final Map<String, String> declaredBy = new LinkedHashMap<>();

  @Override
  public Object postProcessAfterInitialization(Object bean, String beanName) {
    Class<?> type = AopUtils.getTargetClass(bean);
    Map<Method, XjobHandler> annotated =
        MethodIntrospector.selectMethods(
            type,
            (MethodIntrospector.MetadataLookup<XjobHandler>)
                method -> AnnotatedElementUtils.findMergedAnnotation(method, XjobHandler.class));
    annotated.forEach(
        (method, annotation) -> register(annotation.value(), bean, beanName, method));
    return bean;
  }

  /** The handlers found so far, by name, in the order they were found. */
  public Map<String, JobHandler> handlers() {
    return Collections.unmodifiableMap(handlers);
  }

  void register(String name, Object bean, String beanName, Method method) {
    String where = beanName + "." + method.getName();
    if (name == null || name.isBlank()) {
      throw new IllegalStateException("@XjobHandler on " + where + " has a blank name");
    }
    Class<?>[] parameters = method.getParameterTypes();
    boolean takesContext = parameters.length == 1 && parameters[0] == JobContext.class;
    if (parameters.length > 1 || (parameters.length == 1 && !takesContext)) {
      throw new IllegalStateException(
          "@XjobHandler(\"" + name + "\") on " + where
              + " must take no parameter or one JobContext");
    }
    String previous = declaredBy.putIfAbsent(name, where);
    if (previous != null) {
      throw new IllegalStateException(
          "@XjobHandler(\"" + name + "\") is declared twice: on " + previous + " and on " + where);
    }
    Method invocable = AopUtils.selectInvocableMethod(method, bean.getClass());
    invocable.trySetAccessible();
    handlers.put(name, run -> invoke(invocable, bean, takesContext ? new Object[] {run} : new Object[0]));
  }

  private static String invoke(Method method, Object bean, Object[] arguments) throws Exception {
    try {
      Object message = method.invoke(bean, arguments);
      return message == null ? "" : message.toString();
    } catch (InvocationTargetException e) {
      // The handler's own exception fails the run with its message, not the reflection wrapper.
      Throwable cause = e.getCause();
      if (cause instanceof Exception exception) {
        throw exception;
      }
      if (cause instanceof Error error) {
        throw error;
      }
      throw e;
    }
  }
}
